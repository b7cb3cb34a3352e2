#!/usr/bin/env python3
"""Azure and GCS helpers for the integration tests (Azurite, the GCS emulator, on loopback),
independent of walc.

  objstore_tool.py mkcontainer ENDPOINT ACCOUNT KEY CONTAINER CAFILE
      create a container with a Shared Key request
  objstore_tool.py sas ACCOUNT KEY CONTAINER [PERMS] [EXPIRY_SECONDS]
      print a service SAS for the container (sp=PERMS, default racwdl; expiry from now,
      default 3600)
  objstore_tool.py tokens PORT LOG [--lifetime S] [--tenant T] [--assertion-file F]
      fake token endpoints on 127.0.0.1:PORT (what cannot run here: Azure AD, the instance
      metadata services, Google's OAuth2 endpoint):
        POST /TENANT/oauth2/v2.0/token  Azure AD client_credentials, with the secret
                                        "walc-secret" or a federated client_assertion (equal
                                        to --assertion-file's content when given)
        GET  /metadata/identity/oauth2/token   Azure managed identity (Metadata: true)
        GET  /computeMetadata/v1/instance/service-accounts/default/token
                                        GCE/GKE metadata server (Metadata-Flavor: Google)
        POST /token                     Google OAuth2: a service account's JWT (three parts,
                                        claims iss, aud, scope; its RS256 signature is checked
                                        by the unit tests)
      Azure tokens are unsigned JWTs as Azurite's --oauth basic checks them (issuer, audience,
      expiry). Logs "kind n" per token issued to LOG. Prints "ready PORT".
"""
import base64
import datetime
import hashlib
import hmac
import http.client
import http.server
import json
import ssl
import sys
import time
import urllib.parse
import urllib.request

VERSION = "2021-12-02"


def sign(account, key, method, path, query, headers, length=""):
    ms = sorted((k.lower(), v) for k, v in headers.items() if k.lower().startswith("x-ms-"))
    canon = "".join(f"{k}:{v}\n" for k, v in ms)
    res = f"/{account}{path}" + "".join(f"\n{k}:{v}" for k, v in sorted(query.items()))
    sts = "\n".join([method, "", "", length, "", headers.get("Content-Type", ""), "", "", "", "",
                     "", ""]) + "\n" + canon + res
    mac = hmac.new(base64.b64decode(key), sts.encode(), hashlib.sha256).digest()
    return f"SharedKey {account}:{base64.b64encode(mac).decode()}"


def mkcontainer(endpoint, account, key, container, cafile):
    date = datetime.datetime.utcnow().strftime("%a, %d %b %Y %H:%M:%S GMT")
    h = {"x-ms-date": date, "x-ms-version": VERSION}
    q = {"restype": "container"}
    h["Authorization"] = sign(account, key, "PUT", f"/{container}", q, h)
    # Python does not resolve *.localhost: connect to 127.0.0.1 and name the host in Host
    # (the certificate is still checked against the test's CA)
    u = urllib.parse.urlparse(endpoint)
    ctx = ssl.create_default_context(cafile=cafile)
    ctx.check_hostname = False
    conn = http.client.HTTPSConnection("127.0.0.1", u.port, context=ctx, timeout=30)
    h["Host"] = u.netloc
    h["Content-Length"] = "0"
    conn.request("PUT", f"/{container}?restype=container", body=b"", headers=h)
    r = conn.getresponse()
    body = r.read()
    if r.status not in (201, 409):  # 409: exists already
        sys.exit(f"create container {container}: HTTP {r.status} {body[:300]!r}")


def sas(account, key, container, perms="racwdl", ttl=3600):
    start = ""
    expiry = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + ttl))
    canon = f"/blob/{account}/{container}"
    # service SAS, version 2020-12-06 field order
    sts = "\n".join([perms, start, expiry, canon, "", "", "https", VERSION, "c", "", "", "", "",
                     "", "", ""])
    sig = base64.b64encode(hmac.new(base64.b64decode(key), sts.encode(), hashlib.sha256).digest())
    return urllib.parse.urlencode({"sv": VERSION, "se": expiry, "sr": "c", "sp": perms,
                                   "spr": "https", "sig": sig.decode()})


def b64u(d):
    return base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()


def tokens(port, log, lifetime=3600, tenant="walc-tenant", assertion_file=None):
    counter = {"n": 0}
    out = open(log, "a", buffering=1)

    class H(http.server.BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def token(self, kind, opaque=False):
            counter["n"] += 1
            now = int(time.time())
            if opaque:  # Google's tokens are opaque strings
                out.write(f"{kind} {counter['n']}\n")
                body = json.dumps({"access_token": f"ya29.walc-it-{counter['n']}",
                                   "expires_in": lifetime, "token_type": "Bearer"}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            claims = {"aud": "https://storage.azure.com", "iss": f"https://sts.windows.net/{tenant}/",
                      "iat": now, "nbf": now - 60, "exp": now + lifetime, "tid": tenant,
                      "oid": "00000000-0000-0000-0000-000000000001", "n": counter["n"]}
            jwt = b64u({"alg": "RS256", "typ": "JWT"}) + "." + b64u(claims) + ".c2ln"
            out.write(f"{kind} {counter['n']}\n")
            body = json.dumps({"access_token": jwt, "token_type": "Bearer",
                               "expires_in": str(lifetime)}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def fail(self, code, err):
            body = json.dumps({"error": err, "error_description": "refused by az_tool"}).encode()
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):
            n = int(self.headers.get("Content-Length", 0))
            form = urllib.parse.parse_qs(self.rfile.read(n).decode())
            if self.path == "/token":
                jwt = form.get("assertion", [""])[0].split(".")
                if form.get("grant_type") != ["urn:ietf:params:oauth:grant-type:jwt-bearer"] \
                        or len(jwt) != 3:
                    return self.fail(400, "invalid_grant")
                pad = jwt[1] + "=" * (-len(jwt[1]) % 4)
                claims = json.loads(base64.urlsafe_b64decode(pad))
                if claims.get("iss") != "walc-it@test.iam.gserviceaccount.com" or \
                        "devstorage" not in claims.get("scope", "") or \
                        claims.get("aud") != f"http://127.0.0.1:{port}/token":
                    return self.fail(400, "invalid_grant")
                return self.token("google-jwt", opaque=True)
            if not self.path.startswith(f"/{tenant}/oauth2/v2.0/token"):
                return self.fail(404, "invalid_tenant")
            if form.get("scope") != ["https://storage.azure.com/.default"] or \
                    form.get("grant_type") != ["client_credentials"]:
                return self.fail(400, "invalid_request")
            if "client_assertion" in form:
                want = open(assertion_file).read().strip() if assertion_file else None
                if want is not None and form["client_assertion"] != [want]:
                    return self.fail(401, "invalid_client")
                return self.token("workload")
            if form.get("client_secret") != ["walc-secret"]:
                return self.fail(401, "invalid_client")
            return self.token("secret")

        def do_GET(self):
            u = urllib.parse.urlparse(self.path)
            q = urllib.parse.parse_qs(u.query)
            if u.path == "/computeMetadata/v1/instance/service-accounts/default/token":
                if self.headers.get("Metadata-Flavor") != "Google":
                    return self.fail(403, "missing Metadata-Flavor")
                return self.token("gce-metadata", opaque=True)
            if u.path != "/metadata/identity/oauth2/token" or self.headers.get("Metadata") != "true" \
                    or q.get("resource") != ["https://storage.azure.com/"]:
                return self.fail(400, "invalid_request")
            return self.token("imds")

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", port), H)
    print(f"ready {port}", flush=True)
    srv.serve_forever()


def main():
    a = sys.argv[1:]
    if a[0] == "mkcontainer":
        mkcontainer(*a[1:6])
    elif a[0] == "sas":
        print(sas(a[1], a[2], a[3], a[4] if len(a) > 4 else "racwdl",
                  int(a[5]) if len(a) > 5 else 3600))
    elif a[0] == "tokens":
        opts = dict(zip(a[3::2], a[4::2]))
        tokens(int(a[1]), a[2], int(opts.get("--lifetime", 3600)),
               opts.get("--tenant", "walc-tenant"), opts.get("--assertion-file"))
    else:
        sys.exit("usage: see the docstring")


if __name__ == "__main__":
    main()

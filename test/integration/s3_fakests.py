#!/usr/bin/env python3
"""A fake AWS credentials world in front of a real S3 server, for the credential tests.

One HTTP server on 127.0.0.1 that plays three parts:
  * STS: POST / with Action=AssumeRoleWithWebIdentity checks RoleArn and the web identity
    token, and hands out fresh temporary credentials (key id, secret, session token) that
    expire after --ttl seconds;
  * EC2 instance metadata (IMDSv2): PUT /latest/api/token, then
    GET /latest/meta-data/iam/security-credentials/[ROLE] with that token, handing out the same
    kind of temporary credentials;
  * S3: every other request must be signed (SigV4, re-verified with botocore) with credentials
    it issued, carry their session token and not be past their expiry (else 400 ExpiredToken,
    or past --reject-after seconds from issue); it is then re-signed with the real server's
    key and forwarded to --upstream, and the answer relayed.
Logs one line per event to --log ("issue KEYID ttl", "s3 KEYID METHOD PATH STATUS",
"reject KEYID CODE") and every issued secret and token to --secrets (for leak checks).
Prints "ready PORT" once listening.
"""
import argparse
import datetime
import http.client
import http.server
import secrets
import sys
import threading
import time
from urllib.parse import parse_qs

from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials

LOCK = threading.Lock()
ISSUED = {}  # key id -> (secret, token, issued_at, expires_at)
IMDS_TOKENS = set()
COUNTER = [0]


def log(args, line):
    with LOCK:
        with open(args.log, "a") as f:
            f.write(f"{time.time():.3f} {line}\n")


def issue(args):
    with LOCK:
        COUNTER[0] += 1
        kid = f"ASIAWALCFAKE{COUNTER[0]:06d}"
        secret = secrets.token_urlsafe(30)
        token = "FwoGZXIvYXdzE" + secrets.token_urlsafe(60)
        now = time.time()
        ISSUED[kid] = (secret, token, now, now + args.ttl)
        with open(args.secrets, "a") as f:
            f.write(f"{secret}\n{token}\n")
    exp = datetime.datetime.utcfromtimestamp(now + args.ttl).strftime("%Y-%m-%dT%H:%M:%SZ")
    log(args, f"issue {kid} {args.ttl}")
    return kid, secret, token, exp


def sign(method, url, headers, body, creds, region, timestamp):
    req = AWSRequest(method=method, url=url, headers=headers, data=body)
    req.context["timestamp"] = timestamp
    req.context["client_config"] = Config(s3={"payload_signing_enabled": True})
    auth = S3SigV4Auth(creds, "s3", region)
    auth._modify_request_before_signing(req)
    canonical = auth.canonical_request(req)
    sig = auth.signature(auth.string_to_sign(req, canonical), req)
    auth._inject_signature_to_request(req, sig)
    return req


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *a):
        pass

    def reply(self, status, body, ctype="application/xml", extra=None):
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def error(self, status, code, kid="-"):
        log(self.server.args, f"reject {kid} {code}")
        self.reply(status, f"<?xml version=\"1.0\"?><Error><Code>{code}</Code>"
                           f"<Message>fake sts</Message></Error>")

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    # --- STS and IMDS ---------------------------------------------------------------------
    def sts(self, body):
        args = self.server.args
        form = {k: v[0] for k, v in parse_qs(body.decode(), keep_blank_values=True).items()}
        if form.get("Action") != "AssumeRoleWithWebIdentity":
            return self.error(400, "InvalidAction")
        if form.get("RoleArn") != args.role:
            return self.error(403, "AccessDenied")
        if form.get("WebIdentityToken") != open(args.token_file).read().strip():
            return self.error(400, "InvalidIdentityToken")
        kid, secret, token, exp = issue(args)
        self.reply(200, "<AssumeRoleWithWebIdentityResponse><AssumeRoleWithWebIdentityResult>"
                        f"<Credentials><AccessKeyId>{kid}</AccessKeyId><SecretAccessKey>{secret}"
                        f"</SecretAccessKey><SessionToken>{token}</SessionToken><Expiration>{exp}"
                        "</Expiration></Credentials></AssumeRoleWithWebIdentityResult>"
                        "</AssumeRoleWithWebIdentityResponse>")

    def imds(self):
        args = self.server.args
        if self.command == "PUT" and self.path == "/latest/api/token":
            tok = secrets.token_urlsafe(20)
            IMDS_TOKENS.add(tok)
            return self.reply(200, tok, "text/plain")
        if self.headers.get("X-aws-ec2-metadata-token") not in IMDS_TOKENS:
            return self.reply(401, "", "text/plain")
        base = "/latest/meta-data/iam/security-credentials/"
        if self.path == base:
            return self.reply(200, "walc-role\n", "text/plain")
        if self.path == base + "walc-role":
            kid, secret, token, exp = issue(args)
            return self.reply(200, f'{{"Code":"Success","AccessKeyId":"{kid}","SecretAccessKey":'
                                   f'"{secret}","Token":"{token}","Expiration":"{exp}"}}',
                              "application/json")
        return self.reply(404, "", "text/plain")

    # --- S3 front -------------------------------------------------------------------------
    def s3(self, body):
        args = self.server.args
        auth = self.headers.get("Authorization", "")
        try:
            cred = auth.split("Credential=")[1].split(",")[0]
            kid, date, region = cred.split("/")[0:3]
            signed = auth.split("SignedHeaders=")[1].split(",")[0].split(";")
            given = auth.split("Signature=")[1].strip()
        except IndexError:
            return self.error(403, "AccessDenied")
        with LOCK:
            entry = ISSUED.get(kid)
        if entry is None:
            return self.error(403, "InvalidAccessKeyId", kid)
        secret, token, issued_at, expires_at = entry
        now = time.time()
        if now > expires_at or (args.reject_after and now > issued_at + args.reject_after):
            return self.error(400, "ExpiredToken", kid)
        if self.headers.get("x-amz-security-token") != token:
            return self.error(403, "InvalidToken", kid)
        hdrs = {h: self.headers.get(h) for h in signed}
        host = self.headers.get("Host")
        req = sign(self.command, f"http://{host}{self.path}", hdrs, body,
                   Credentials(kid, secret, token), region, self.headers.get("x-amz-date"))
        if req.headers["Authorization"].split("Signature=")[1] != given:
            return self.error(403, "SignatureDoesNotMatch", kid)
        # Forward with the real key.
        up_host = args.upstream
        fwd = {k: v for k, v in self.headers.items()
               if k.lower() not in ("authorization", "x-amz-security-token", "x-amz-date",
                                    "x-amz-content-sha256", "host", "content-length",
                                    "connection", "accept", "user-agent", "expect")}
        fwd["Host"] = up_host
        stamp = datetime.datetime.utcnow().strftime("%Y%m%dT%H%M%SZ")
        r2 = sign(self.command, f"http://{up_host}{self.path}", fwd, body,
                  Credentials(args.access_key, args.secret_key), "us-east-1", stamp)
        conn = http.client.HTTPConnection(up_host, timeout=60)
        conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
        for k, v in r2.headers.items():
            conn.putheader(k, v)
        conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        resp = conn.getresponse()
        data = resp.read()
        log(args, f"s3 {kid} {self.command} {self.path.split('?')[0]} {resp.status}")
        extra = {k: v for k, v in resp.getheaders()
                 if k.lower() in ("etag", "last-modified", "x-amz-request-id", "content-range")}
        if self.command == "HEAD":
            self.send_response(resp.status)
            for k, v in resp.getheaders():
                if k.lower() not in ("connection", "transfer-encoding"):
                    self.send_header(k, v)
            self.end_headers()
        else:
            self.reply(resp.status, data, resp.getheader("Content-Type") or "application/xml",
                       extra)
        conn.close()

    def dispatch(self):
        body = self.body()
        if self.path.startswith("/latest/"):
            return self.imds()
        if self.command == "POST" and self.path in ("/", "/sts", "/sts/"):
            return self.sts(body)
        return self.s3(body)

    do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = dispatch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--listen", type=int, required=True)
    ap.add_argument("--upstream", required=True)
    ap.add_argument("--access-key", required=True)
    ap.add_argument("--secret-key", required=True)
    ap.add_argument("--role", required=True)
    ap.add_argument("--token-file", required=True)
    ap.add_argument("--ttl", type=int, default=3600)
    ap.add_argument("--reject-after", type=float, default=0)
    ap.add_argument("--log", required=True)
    ap.add_argument("--secrets", required=True)
    args = ap.parse_args()
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", args.listen), Handler)
    srv.daemon_threads = True
    srv.args = args
    print(f"ready {args.listen}", flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    sys.exit(main())

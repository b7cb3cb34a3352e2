#!/usr/bin/env python3
"""Re-sign every request walc signs with AWS's own signer (botocore) and compare.

Reads the JSON lines of `test_s3 --dump-signed` on stdin. For each request it checks, each
independently of walc's code:
  * the URL path and query are what urllib's quoting of the raw key and parameters gives
    (path-style or virtual-hosted);
  * x-amz-content-sha256 is the SHA-256 of the body;
  * the Authorization header equals botocore S3SigV4Auth's for the same method, URL, headers,
    body, credentials, region and timestamp.
Prints one line per failure and a last line "sigcheck: N passed, N failed".
"""
import hashlib
import json
import sys
from urllib.parse import quote, urlsplit

from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials

BUCKET = "walc-bucket"


def expected_path(host, key, path):
    enc = quote(key, safe="/~")
    if host.startswith(BUCKET + "."):
        return "/" + enc
    return "/" + BUCKET + ("/" + enc if key or path != "/" + BUCKET else "")


def check(r):
    errs = []
    url = urlsplit(r["url"])
    headers = {k: v for k, v in r["headers"]}
    body = bytes.fromhex(r["body_hex"])

    host = headers["host"]
    if url.netloc != host:
        errs.append(f"Host header {host!r} differs from URL host {url.netloc!r}")
    want_path = expected_path(host, r["key"], url.path)
    if r["key"] and url.path != want_path:
        errs.append(f"path {url.path!r}, urllib gives {want_path!r}")
    want_query = "&".join(sorted(f"{quote(k, safe='~')}={quote(v, safe='~')}" for k, v in r["query"]))
    if url.query != want_query:
        errs.append(f"query {url.query!r}, urllib gives {want_query!r}")
    if headers["x-amz-content-sha256"] != hashlib.sha256(body).hexdigest():
        errs.append("x-amz-content-sha256 is not the SHA-256 of the body")

    creds = Credentials(r["access"], r["secret"], r["token"])
    send = {k: v for k, v in r["headers"] if k not in ("authorization",)}
    req = AWSRequest(method=r["method"], url=r["url"], headers=send, data=body)
    req.context["timestamp"] = headers["x-amz-date"]
    req.context["client_config"] = Config(s3={"payload_signing_enabled": True})
    auth = S3SigV4Auth(creds, "s3", r["region"])
    auth._modify_request_before_signing(req)
    canonical = auth.canonical_request(req)
    sts = auth.string_to_sign(req, canonical)
    sig = auth.signature(sts, req)
    auth._inject_signature_to_request(req, sig)
    want = req.headers["Authorization"]
    if headers["authorization"] != want:
        errs.append(f"Authorization differs:\n  walc:     {headers['authorization']}\n"
                    f"  botocore: {want}\n  canonical request (botocore):\n{canonical}")
    return errs


def main():
    passed = failed = 0
    seen = set()
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        r = json.loads(line)
        errs = check(r)
        seen.add((r["method"], "path" if urlsplit(r["url"]).netloc.startswith(BUCKET) is False else "vhost",
                  bool(r["token"]), bool(r["query"])))
        if errs:
            failed += 1
            print(f"FAIL {r['method']} {r['url']}")
            for e in errs:
                print("  " + e)
        else:
            passed += 1
    # The dump must cover what the test promises: both styles, tokens, query strings.
    styles = {s[1] for s in seen}
    if styles != {"path", "vhost"} or not any(s[2] for s in seen) or not any(s[3] for s in seen):
        print(f"FAIL coverage: styles {sorted(styles)}, token {any(s[2] for s in seen)}, "
              f"query {any(s[3] for s in seen)}")
        failed += 1
    print(f"sigcheck: {passed} passed, {failed} failed")
    return 1 if failed or passed == 0 else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env bash
# Makes the OpenPGP test keys of test_pgp.c in this directory with GnuPG (a new run makes new
# keys; the tests do not depend on their ids). Curve25519 keys and a low S2K count keep the
# tests fast; the RSA key with GnuPG's default S2K is the WAL-G fixture's
# (test/fixtures/walg-v3.0.9-pgp/keys).
#   other.{pub,sec}.asc    ed25519 + cv25519 subkey, passphrase "other passphrase"
#   plain.sec.asc          ed25519 + cv25519 subkey, no passphrase
#   expired.pub.asc        made in 2020, expired after a day: cannot be encrypted to
#   sign-only.pub.asc      ed25519 with no encryption subkey
#   two.pub.asc            other's and plain's public keys in one armor block
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
G=$(mktemp -d)
trap 'GNUPGHOME=$G gpgconf --kill gpg-agent 2>/dev/null || true; rm -rf "$G"' EXIT
gpg_() { GNUPGHOME=$G gpg --batch --pinentry-mode loopback --s2k-count 65536 "$@" 2>/dev/null; }
fpr() { GNUPGHOME=$G gpg --with-colons -k "$1" | awk -F: '/^fpr/ {print $10; exit}'; }

gpg_ --passphrase 'other passphrase' --quick-gen-key 'walc test other <other@walc.invalid>' ed25519 sign never
gpg_ --passphrase 'other passphrase' --quick-add-key "$(fpr other@walc.invalid)" cv25519 encr never
gpg_ --passphrase '' --quick-gen-key 'walc test plain <plain@walc.invalid>' ed25519 sign never
gpg_ --passphrase '' --quick-add-key "$(fpr plain@walc.invalid)" cv25519 encr never
gpg_ --passphrase '' --faked-system-time 20200101T000000 --quick-gen-key \
	'walc test expired <expired@walc.invalid>' ed25519 sign 1d
gpg_ --passphrase '' --faked-system-time 20200101T000000 --quick-add-key \
	"$(fpr expired@walc.invalid)" cv25519 encr 1d
gpg_ --passphrase '' --quick-gen-key 'walc test sign-only <sign-only@walc.invalid>' ed25519 sign never

gpg_ --armor --export other@walc.invalid >"$HERE/other.pub.asc"
gpg_ --passphrase 'other passphrase' --armor --export-secret-keys other@walc.invalid >"$HERE/other.sec.asc"
gpg_ --passphrase '' --armor --export-secret-keys plain@walc.invalid >"$HERE/plain.sec.asc"
gpg_ --armor --export expired@walc.invalid >"$HERE/expired.pub.asc"
gpg_ --armor --export sign-only@walc.invalid >"$HERE/sign-only.pub.asc"
gpg_ --armor --export other@walc.invalid plain@walc.invalid >"$HERE/two.pub.asc"

#!/usr/bin/env bash
# The storage matrix (objstore_matrix.sh) on SFTP (Debian's sshd on 127.0.0.1, key
# authentication, host key checked): WAL of every codec, with and without libsodium, local,
# delta and remote backups restored and compared, delta restore, PITR, retention with
# pipelined deletes, st.
# integration: long
. "$(dirname "$0")/lib.sh"
export STORE=sftp
# shellcheck source=objstore_matrix.sh
. "$(dirname "$0")/objstore_matrix.sh"

#!/usr/bin/env bash
# The storage matrix (objstore_matrix.sh) on Google Cloud Storage (the Firebase CLI's emulator): WAL of every codec, with and
# without libsodium, local, delta and remote backups restored and compared, delta restore,
# PITR, retention with batched deletes, st.
# integration: long
. "$(dirname "$0")/lib.sh"
export STORE=gcs
# shellcheck source=objstore_matrix.sh
. "$(dirname "$0")/objstore_matrix.sh"

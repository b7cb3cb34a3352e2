#!/usr/bin/env bash
# Identity options and faults (objstore_faults.sh) on Google Cloud Storage (the Firebase CLI's emulator):
# every identity walc offers there, an expired token refreshed, 20% injected faults, a GET
# resumed with Range twice.
. "$(dirname "$0")/lib.sh"
export STORE=gcs
# shellcheck source=objstore_faults.sh
. "$(dirname "$0")/objstore_faults.sh"

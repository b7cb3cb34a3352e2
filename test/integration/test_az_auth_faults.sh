#!/usr/bin/env bash
# Identity options and faults (objstore_faults.sh) on Azure Blob Storage (Azurite, OAuth mode):
# every identity walc offers there, an expired token refreshed, 20% injected faults, a GET
# resumed with Range twice.
. "$(dirname "$0")/lib.sh"
export STORE=az
# shellcheck source=objstore_faults.sh
. "$(dirname "$0")/objstore_faults.sh"

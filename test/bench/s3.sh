# shellcheck shell=bash
# make bench section "s3" (sourced by run.sh): not written yet.
bench_s3() { log "bench section s3: not written yet"; }

# shellcheck shell=bash
# make bench section "wal" (sourced by run.sh): not written yet.
bench_wal() { log "bench section wal: not written yet"; }

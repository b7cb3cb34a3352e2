# shellcheck shell=bash
# make bench section "delta-restore" (sourced by run.sh): not written yet.
bench_delta_restore() { log "bench section delta-restore: not written yet"; }

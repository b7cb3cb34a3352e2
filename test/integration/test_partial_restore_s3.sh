#!/usr/bin/env bash
# test_partial_restore.sh with the repository on S3 (s3rver): --restore-only of walc's backup,
# and with WAL-G v3.0.9 both ways, DatabasesByNames read from a bucket.
WALC_IT_S3=1 exec bash "$(dirname "$0")/test_partial_restore.sh"

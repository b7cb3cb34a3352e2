#!/usr/bin/env bash
# test_catchup.sh with the repository on S3 (s3rver): catchup-push and catchup-fetch, and
# WAL-G v3.0.9's catchup both ways, through catchup_005/ in a bucket.
WALC_IT_S3=1 exec bash "$(dirname "$0")/test_catchup.sh"

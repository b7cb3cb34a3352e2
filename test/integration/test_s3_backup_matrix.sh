#!/usr/bin/env bash
# Base backups on S3 for every codec, with and without libsodium (Ceph RGW): archive_command
# pushes each WAL file into 10 S3 repositories; each gets one backup, in turn taken under
# pgbench writes and of the quiet source (so each codec has one of each, one with a key and
# one without). Each is fetched from S3 into a new directory and started with
# restore_command = walc wal-fetch: it reaches consistency and bt_index_check passes on every
# index; a quiet one dumps exactly like the source. (A loaded and a quiet backup in every
# repository, all twenty restored, took CI's sanitized run near its timeout; restoring one of
# each repository's two left ten backups that nothing read.)
# integration: long
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/s3lib.sh"
s3_setup s3matrix

s3_rgw_start
s3_mb walc
CONFIGS=(lz4 zstd brotli lzma none lz4-hex zstd-base64 brotli-hex lzma-base64 none-hex)
mkdir -p "$T/conf"
head -c 32 /dev/urandom >"$T/key.bin"
od -An -v -tx1 "$T/key.bin" | tr -d ' \n' >"$T/key.hex"
base64 -w0 "$T/key.bin" >"$T/key.base64"
chmod 600 "$T/key.hex" "$T/key.base64"
for c in "${CONFIGS[@]}"; do
	{
		echo "WALG_S3_PREFIX=s3://walc/$c"
		echo "AWS_ENDPOINT=$S3_ENDPOINT"
		echo "AWS_S3_FORCE_PATH_STYLE=true"
		echo "AWS_ACCESS_KEY_ID=$AWS_ACCESS_KEY_ID"
		echo "AWS_SECRET_ACCESS_KEY=$AWS_SECRET_ACCESS_KEY"
		echo "AWS_REGION=us-east-1"
		echo "WALG_COMPRESSION_METHOD=${c%%-*}"
		echo "WALG_PG_WAL_SIZE=1"
		echo "WALG_UPLOAD_CONCURRENCY=1" # one data directory, ten repositories: no shared markers
		case $c in *-*)
			echo "WALG_LIBSODIUM_KEY_PATH=$T/key.${c#*-}"
			echo "WALG_LIBSODIUM_KEY_TRANSFORM=${c#*-}"
			;;
		esac
	} >"$T/conf/$c.env"
done
# The ten pushes of a segment run side by side: one after another, a sanitized build under CI's
# load archived the backups' WAL slower than twenty backups wrote it (stop 33's CI).
cat >"$T/conf/archive.sh" <<EOF
#!/bin/sh
pids=
for c in ${CONFIGS[*]}; do
	env \$(cat "$T/conf/\$c.env") "$WALC_PG" wal-push "\$1" &
	pids="\$pids \$!"
done
rc=0
for p in \$pids; do wait "\$p" || rc=1; done
exit \$rc
EOF
chmod 755 "$T/conf/archive.sh"
pg_own "$T"
cfg() { cat "$T/conf/$1.env"; }

pg_init "$T/src" --wal-segsize=1
PORT=$(free_port)
pg_conf "$T/src" "wal_level = replica" "archive_mode = on" "archive_command = '$T/conf/archive.sh %p'"
pg_start "$T/src" "$PORT"
as_pg "$PGBIN/pgbench" -h "$T" -p "$PORT" -i -s 1 -q postgres >/dev/null 2>&1
push() { # CONFIG
	# shellcheck disable=SC2046
	wrun_pg $(cfg "$1") PGHOST="$T" PGPORT="$PORT" -- backup-push "$T/src"
	expect_rc 0 "backup-push $1"
	printf '%s\n' "$W_ERR" | sed -n 's/.*wrote backup \([^ ]*\) to .*/\1/p'
}
declare -A BACKUP # the even-numbered repositories' backups are taken under writes, the others quiet
as_pg "$PGBIN/pgbench" -h "$T" -p "$PORT" -n -c 2 -T 600 -R 100 postgres >/dev/null 2>&1 &
BG_PIDS+=($!)
for ((k = 0; k < ${#CONFIGS[@]}; k += 2)); do BACKUP[${CONFIGS[$k]}]=$(push "${CONFIGS[$k]}"); done
# (runuser is the background job: end pgbench itself by ending its sessions)
psqlc "$PORT" "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'pgbench'" >/dev/null
wait 2>/dev/null || true
BG_PIDS=()
psqlc "$PORT" "CHECKPOINT"
dump_norm "$PORT" >"$T/src.dump"
for ((k = 1; k < ${#CONFIGS[@]}; k += 2)); do BACKUP[${CONFIGS[$k]}]=$(push "${CONFIGS[$k]}"); done
last=$(psqlc "$PORT" "SELECT pg_walfile_name(pg_switch_wal())")
wait_archived "$T/src" "$last" 120
pg_stop "$T/src"

restore() { # CONFIG NAME DIR compare|no
	# shellcheck disable=SC2046
	wrun $(cfg "$1") -- backup-fetch "$3" "$2"
	expect_rc 0 "backup-fetch $1 $2 from S3"
	recover_conf "$3" "$(cfg "$1" | tr '\n' ' ')"
	local p
	p=$(free_port)
	pg_start "$3" "$p"
	wait_not_in_recovery "$p"
	if [ "$4" = compare ]; then
		dump_norm "$p" >"$3.dump"
		cmp -s "$T/src.dump" "$3.dump" || fail "$1: the quiet backup restored from S3 differs from the source"
	fi
	amcheck_all "$p"
	pg_stop "$3"
	rm -rf "$3"
}
for k in "${!CONFIGS[@]}"; do
	c=${CONFIGS[$k]}
	if [ $((k % 2)) = 0 ]; then
		restore "$c" "${BACKUP[$c]}" "$T/r-$c-load" no
		log "ok: $c, the backup taken under writes (${BACKUP[$c]})"
	else
		restore "$c" "${BACKUP[$c]}" "$T/r-$c-quiet" compare
		log "ok: $c, the quiet backup (${BACKUP[$c]})"
	fi
done
log "every codec, with and without a key, backs up to and restores from S3"

/* The verbs, their arguments and options (WAL-G v3.0.9's, plus walc's own), and their help. */
#include <string.h>

#include "cmd/walc/commands.h"

#define TARGET_STORAGE                                                                        \
	{ "target-storage", 0, "NAME",                                                            \
	  "only this storage (\"default\": the main one; else a WALG_FAILOVER_STORAGES name)" }
#define END { NULL, 0, NULL, NULL }

static const opt wal_push_opts[] = { TARGET_STORAGE, END };
static const opt wal_fetch_opts[] = { TARGET_STORAGE, END };
static const opt wal_show_opts[] = {
	{ "detailed-json", 0, NULL, "detailed JSON output" },
	{ "without-backups", 0, NULL, "do not count backups per timeline" },
	{ "restore-points", 0, NULL, "the restore points in the archived WAL (reads all of it)" },
	END,
};
static const opt wal_verify_opts[] = {
	{ "json", 0, NULL, "JSON output" },
	{ "timeline", 0, "N", "check up to --lsn on this timeline, not the cluster's position" },
	{ "lsn", 0, "X/Y", "check up to this LSN (with --timeline)" },
	{ "backup-name", 0, "NAME", "integrity: check from this backup's start" },
	END,
};
static const opt backup_push_opts[] = {
	{ "full", 'f', NULL, "a full backup even when a delta is due" },
	{ "permanent", 'p', NULL, "a permanent backup (survives retention)" },
	{ "verify", 'v', NULL, "check every page's checksum, record corrupt blocks" },
	{ "store-all-corrupt", 's', NULL, "record every corrupt block, not the first 10 per file" },
	{ "add-user-data", 0, "JSON", "user data of the backup (WALG_SENTINEL_USER_DATA)" },
	{ "delta-from-name", 0, "NAME", "base a delta on this backup" },
	{ "delta-from-user-data", 0, "JSON", "base a delta on the backup with this user data" },
	{ "without-files-metadata", 0, NULL,
	  "store no files_metadata.json (a full backup; no delta restore from it)" },
	{ "rating-composer", 'r', NULL, NULL },
	{ "copy-composer", 'c', NULL, NULL },
	{ "database-composer", 'b', NULL, NULL },
	TARGET_STORAGE,
	END,
};
static const opt backup_fetch_opts[] = {
	{ "restore-spec", 0, "FILE", "where tablespaces go (WAL-G's spec JSON)" },
	{ "original-tablespaces", 0, NULL, "tablespaces where the backup recorded them (if empty)" },
	{ "target-user-data", 0, "JSON", "restore the backup with this user data" },
	{ "mask", 0, "GLOB", "restore only files whose path (relative to DESTINATION) matches" },
	{ "delta", 0, NULL, "DESTINATION holds an old copy: rewrite only what differs" },
	{ "force", 0, NULL, "with --delta: even another cluster's or a crashed server's directory" },
	{ "target-time", 0, "TIME", "recover to this time (RFC 3339, or as PostgreSQL prints it, with a zone): picks the backup, sets recovery" },
	{ "target-lsn", 0, "LSN", "recover to this LSN" },
	{ "target-name", 0, "NAME", "recover to this restore point (pg_create_restore_point)" },
	{ "target-xid", 0, "XID", "recover to the end of this transaction" },
	{ "target-timeline", 0, "TLI", "with a target: follow this timeline's history, not the newest's" },
	{ "target-action", 0, "ACTION", "with a target: promote (default), pause or shutdown" },
	{ "restore-command", 0, "CMD", "with a target: the restore_command (default: this walc)" },
	{ "keep-archiving", 0, NULL,
	  "with a target: leave archiving as the backup had it (default: off)" },
	{ "restore-only", 0, "NAMES",
	  "only these databases and tables (DB, DB/TABLE, DB/SCHEMA.TABLE, '*' any; comma-separated),"
	  " with every database's system catalogs (WAL-G's partial restore)" },
	{ "reverse-unpack", 0, NULL, NULL },
	{ "skip-redundant-tars", 0, NULL, NULL },
	TARGET_STORAGE,
	END,
};
static const opt backup_list_opts[] = {
	{ "pretty", 0, NULL, "a framed table" },
	{ "json", 0, NULL, "a JSON array" },
	{ "detail", 0, NULL, "metadata.json fields too" },
	{ "recovery-windows", 0, NULL,
	  "with --detail --json: each backup's recovery window (reads the archived WAL)" },
	TARGET_STORAGE,
	END,
};
static const opt backup_verify_opts[] = {
	{ "all", 0, NULL, "every backup in the repository" },
	{ "wal", 0, NULL, "also the WAL after the backup, to the next backup or the newest segment" },
	{ "json", 0, NULL, "one JSON document: summaries and problems" },
	TARGET_STORAGE,
	END,
};
static const opt delete_opts[] = {
	{ "confirm", 0, NULL, "delete (without it: a dry run)" },
	{ "after", 'a', "TIME|NAME", "retain: also keep everything since a time or backup" },
	{ "target-user-data", 0, "JSON", "target: the backup with this user data" },
	{ "without-backup-check", 0, NULL, "garbage: even when no non-permanent backup exists" },
	{ "use-sentinel-time", 0, NULL, "a time compares with backups' start times (default: when their sentinels were written, the time backup-list shows)" },
	{ "verify", 0, NULL,
	  "first backup-verify backups, newest first, until one passes: retention keeps it" },
	{ "daily", 0, "N", "retain: the newest backup of each of the last N days that have one" },
	{ "weekly", 0, "N", "retain: ... of each of the last N ISO weeks" },
	{ "monthly", 0, "N", "retain: ... of each of the last N months" },
	{ "yearly", 0, "N", "retain: ... of each of the last N years" },
	{ "timezone", 0, "ZONE", "retain: the zone days, weeks, months and years are counted in (IANA name; default UTC)" },
	{ "pitr-window", 0, "DURATION",
	  "retain: WAL kept continuous only this far back (7d, 36h); older kept backups keep their own WAL" },
	END,
};
static const opt backup_mark_opts[] = {
	{ "impermanent", 'i', NULL, "make it impermanent again" },
	END,
};
static const opt st_opts[] = {
	{ "recursive", 'r', NULL, "ls: everything below the folder" },
	{ "no-decrypt", 0, NULL, "get, cat: the stored bytes, not decrypted" },
	{ "no-decompress", 0, NULL, "get, cat: not decompressed" },
	{ "no-encrypt", 0, NULL, "put: not encrypted" },
	{ "no-compress", 0, NULL, "put: not compressed" },
	{ "force", 'f', NULL, "put: replace an existing object" },
	{ "overwrite", 0, NULL, "put: the same as --force" },
	{ "read-stdin", 's', NULL, "put: store standard input (put KEY)" },
	{ "glob", 'g', NULL, "ls, rm: PREFIX is a glob pattern" },
	{ "target", 't', "NAME",
	  "the storage (default: \"default\", the main one; a WALG_FAILOVER_STORAGES name; all: "
	  "each in turn)" },
	{ "decrypt", 0, NULL, NULL },
	{ "decompress", 0, NULL, NULL },
	{ "all-versions", 0, NULL, "not supported by walc (object versions): refused" },
	{ "version-id", 0, "ID", "not supported by walc (object versions): refused" },
	END,
};
static const opt copy_opts[] = {
	{ "from", 'f', "FILE", "the WAL-G configuration file of the repository copied from" },
	{ "to", 't', "FILE", "the WAL-G configuration file of the repository copied into" },
	{ "backup-name", 'b', "NAME", "this backup (or LATEST) and its bases only" },
	{ "with-history", 'w', NULL, "the WAL after the backups too, through the newest archived" },
	{ "without-history", 0, NULL, "only the WAL the backups need (the default; WAL-G's older flag)" },
	{ "every", 0, "DURATION",
	  "copy again and again this long apart, until SIGTERM (a second repository that keeps up)" },
	END,
};
static const opt daemon_client_opts[] = {
	{ "timeout", 0, "DURATION", "how long the daemon may take to answer (default 60s)" },
	{ "connection-timeout", 0, "DURATION", "how long connecting may take (default 5s)" },
	END,
};
static const opt catchup_push_opts[] = {
	{ "from-lsn", 0, "LSN", "the standby's LSN: pages changed since it are stored (decimal, "
							"as WAL-G takes it, or X/Y)" },
	END,
};
static const opt catchup_fetch_opts[] = {
	{ "use-new-unwrap", 0, NULL, NULL },
	END,
};
static const opt none[] = { END };

static const command cmd_table[] = {
	{ "wal-push", "WAL_FILE_PATH", 1, 1, wal_push_opts,
	  "archive one WAL file (archive_command = 'walc wal-push %p')",
	  "Compresses (WALG_COMPRESSION_METHOD) and, with a libsodium key, encrypts the file, then\n"
	  "stores it as wal_005/<name>.<ext>. With WALG_PREVENT_WAL_OVERWRITE=true, and always for\n"
	  ".history files, an archived copy with different content is an error and stays as it was;\n"
	  "an identical copy is success without upload. A segment of another cluster than the\n"
	  "repository's is refused (WALG_ALLOW_SYSTEM_ID_CHANGE), and so is a file named as a\n"
	  "segment that is none (not the segment size: WALG_PG_WAL_SIZE, else its header's own; no\n"
	  "long page header for its name's place), a .history that does not parse for its timeline\n"
	  "or a .backup that is not one: nothing is stored.",
	  true, cmd_wal_push, NULL },
	{ "wal-fetch", "WAL_NAME DESTINATION", 2, 2, wal_fetch_opts,
	  "restore one WAL file (restore_command = 'walc wal-fetch %f %p')",
	  "Finds wal_005/<name> whatever compression it was stored with, decrypts, decompresses and\n"
	  "writes DESTINATION atomically. Exit 74 when the archive has no such file, 1 on any other\n"
	  "failure (DESTINATION is then not created). A segment must be one, whatever the codec:\n"
	  "the segment size, a long page header for its name's place, of the repository's cluster\n"
	  "(or the one being recovered). A .history is given only once a segment of its timeline\n"
	  "is archived (else exit 74), so recovery does not follow a timeline with no WAL.",
	  true, cmd_wal_fetch, NULL },
	{ "wal-show", "", 0, 0, wal_show_opts, "show archived WAL per timeline, with gaps",
	  "Lists wal_005/ by timeline: parent and switch point (from .history files), first and\n"
	  "last segment, how many there are and how many the range needs (STATUS LOST_SEGMENTS\n"
	  "when some are missing), and how many backups start on each timeline. A timeline with\n"
	  "no segment of this cluster (a lone or foreign .history) is left out, with a warning.",
	  true, cmd_wal_show, NULL },
	{ "wal-verify", "integrity|timeline...", 1, 2, wal_verify_opts,
	  "check that the archive can restore up to now",
	  "integrity: every segment from the oldest backup's start to the cluster's current one is\n"
	  "archived (FOUND; MISSING_UPLOADING within WALG_UPLOAD_CONCURRENCY of now; MISSING_DELAYED\n"
	  "within WALG_INTEGRITY_MAX_DELAYED_WALS; MISSING_LOST otherwise, or when wal-receive\n"
	  "recorded them lost). timeline: the highest timeline in storage (that this cluster's\n"
	  "segments back) is the cluster's. Connects with the PG* variables (not with --timeline\n"
	  "and --lsn). Unlike WAL-G, walc exits 1 when a check reports FAILURE.",
	  true, cmd_wal_verify, wal_verify_words_ok },
	{ "backup-push", "[PGDATA]", 0, 1, backup_push_opts, "take a base backup of a running cluster",
	  "Starts a non-exclusive backup over a libpq session (PG* variables), streams PGDATA and\n"
	  "its tablespaces as tar partitions (WALG_TAR_SIZE_THRESHOLD, WALG_UPLOAD_DISK_CONCURRENCY\n"
	  "packers; compressed, then encrypted), stops the backup, and writes metadata and the\n"
	  "sentinel last: a backup exists only once its sentinel does. SIGINT or SIGTERM stop it\n"
	  "with no sentinel. PGDATA must be the server's data_directory. Without PGDATA the backup\n"
	  "streams over a replication connection (BASE_BACKUP, remote mode: a pod without the data\n"
	  "directory). Another push writing the same backup name makes this one stop at once.\n\n"
	  "With WALG_DELTA_MAX_STEPS > 0 the backup is a delta of the latest one (or of the latest\n"
	  "full with WALG_DELTA_ORIGIN=LATEST_FULL, or of --delta-from-name): relation files hold\n"
	  "only pages changed since the base started; files unchanged since well before the base\n"
	  "are not stored at all. The databases' relations are recorded by name for\n"
	  "backup-fetch --restore-only (a session to each database; WALG_DISABLE_PARTIAL_RESTORE\n"
	  "skips it).",
	  true, cmd_backup_push, NULL },
	{ "backup-fetch", "DESTINATION [NAME|LATEST]", 1, 2, backup_fetch_opts,
	  "restore a base backup into an empty directory",
	  "Restores backup NAME (or the newest, LATEST, or the one --target-user-data names) into\n"
	  "DESTINATION, which must be empty or absent. A delta backup is applied forward: its full\n"
	  "backup first, then each delta. Tablespaces go inside DESTINATION, in pg_tblspc/OID (as\n"
	  "WAL-G puts them; allow_in_place_tablespaces is added to postgresql.auto.conf), unless\n"
	  "--restore-spec places them, or --original-tablespaces puts them where the backup was\n"
	  "taken; each location must be empty or absent. pg_control is written last;\n"
	  "WALG_DOWNLOAD_CONCURRENCY streams run at once. Then add restore_command =\n"
	  "'walc wal-fetch %f %p' and recovery.signal.\n\n"
	  "--delta (or WALG_DELTA_RESTORE=true): DESTINATION holds an old copy of the cluster,\n"
	  "stopped (PG_VERSION, global/pg_control with the backup's system identifier, no\n"
	  "postmaster.pid). Files whose size and checksum match the backup's are kept, the others\n"
	  "are restored, files the backup does not have are removed, and tar parts holding nothing\n"
	  "needed are not downloaded. Any other directory is refused, but an empty one (a plain\n"
	  "restore) and one an interrupted backup-fetch left. --force admits another cluster's\n"
	  "directory, or a postmaster.pid whose server is gone; never a running server's.\n\n"
	  "--target-time, --target-lsn, --target-name or --target-xid (instead of NAME): restores\n"
	  "the newest backup that ends before the target, once the archived WAL has been read far\n"
	  "enough to prove it reaches the target, then writes restore_command and the target to\n"
	  "postgresql.auto.conf and creates recovery.signal: starting PostgreSQL recovers to the\n"
	  "target. A target the archive cannot reach is refused before anything is written, and\n"
	  "so is one that two timelines' histories both hold (a timeline branched before it while\n"
	  "its parent's WAL reaches it too) unless --target-timeline says which to follow;\n"
	  "recovery_target_timeline is written as the timeline the archive was read along.\n"
	  "Archiving is turned off there too (archive_mode = off, archive_command and\n"
	  "archive_library empty), so that the promoted cluster does not archive its new\n"
	  "timeline into the repository it came from; --keep-archiving leaves the backup's\n"
	  "settings. A restored cluster that becomes a new primary should archive to a new prefix.\n\n"
	  "--restore-only=DB,DB/TABLE,... (WAL-G's partial restore): every database's system\n"
	  "catalogs, the databases and tables named (DB/SCHEMA.TABLE; '*' matches anything) with\n"
	  "what the backup records with a table (its indexes and TOAST table, from walc's\n"
	  "backups), no other relation file: a skipped table holds only what WAL replay writes.\n"
	  "backup-push records the names (DatabasesByNames) unless WALG_DISABLE_PARTIAL_RESTORE;\n"
	  "a name that matches nothing is refused.",
	  true, cmd_backup_fetch, NULL },
	{ "backup-list", "", 0, 0, backup_list_opts, "list base backups",
	  "Lists backups with a sentinel in WAL-G's columns, oldest first in LATEST's order (by\n"
	  "timeline and start segment, another cluster's backups first): the last row is LATEST.\n"
	  "--detail adds two columns: corrupt_blocks (pages that failed backup-push --verify) and\n"
	  "verified (backup-verify's outcome and time: passed@TIME, failed@TIME, or -); --json a\n"
	  "\"verified\" object.",
	  true, cmd_backup_list, NULL },
	{ "backup-verify", "[NAME|LATEST]", 0, 1, backup_verify_opts,
	  "prove a backup restores, without restoring it (walc only)",
	  "Reads every object of backup NAME (LATEST, or every backup with --all) and of its delta\n"
	  "chain in WALG_DOWNLOAD_CONCURRENCY streams, writing nothing: decrypts, decompresses,\n"
	  "parses the tars and increments, compares each file's size and checksum with\n"
	  "files_metadata.json, checks every relation page's header and, when the cluster has data\n"
	  "checksums, its checksum (pages changed after the backup started are left to WAL replay,\n"
	  "as PostgreSQL does). Then reads the WAL from the backup's start to its stop segment\n"
	  "(--wal: to the next backup or the newest segment): present, decodes, every page header\n"
	  "of the right timeline and address, and the timeline's history file. One line per\n"
	  "problem (object, file, block), a summary per backup; exit status 1 on any problem.\n"
	  "Each backup's outcome is kept with it (basebackups_005/NAME/walc_verified.json: when,\n"
	  "what was read, passed or failed), for delete (which keeps the newest that passed),\n"
	  "backup-list --detail and the metrics (WALG_PUSHGATEWAY_URL).",
	  true, cmd_backup_verify, NULL },
	{ "delete",
	  "retain [FULL|FIND_FULL] N | retain [FULL] [N] --daily|--weekly|--monthly|--yearly N... |"
	  " before [FIND_FULL] NAME|TIME | everything [FORCE] | target [FIND_FULL] NAME |"
	  " garbage [ARCHIVES|BACKUPS]",
	  1, 4, delete_opts, "retention: delete old backups and WAL (a dry run without --confirm)",
	  "retain N keeps the N newest backups (FULL: N newest fulls; FIND_FULL: back to the full\n"
	  "of the N-th), --after also keeps everything since a time or backup; before deletes\n"
	  "what is older than a backup or time; target deletes one backup and every delta built\n"
	  "on it (FIND_FULL: its whole chain), never WAL; garbage deletes leftovers older than the\n"
	  "oldest backup (failed pushes' objects, unneeded WAL); everything deletes basebackups_005/\n"
	  "and wal_005/ (FORCE: even permanent backups). Permanent backups and the WAL they need\n"
	  "survive every mode but everything FORCE, every ancestor of a kept delta is kept, and so\n"
	  "is what a running backup-push needs. Backups are ordered as LATEST orders them: by\n"
	  "timeline and start segment (never by a host's clock), another cluster's backups first.\n"
	  "A backup whose sentinel cannot be read is skipped with a warning and never deleted\n"
	  "(but by everything).\n\n"
	  "Every mode keeps the newest backup whose backup-verify passed (its record,\n"
	  "walc_verified.json) and the WAL from it to now, whatever the count or time says, and\n"
	  "says so; target of it is refused, everything needs FORCE. --verify first verifies\n"
	  "backups, newest first, until one passes.\n\n"
	  "retain with calendar buckets (--daily, --weekly, --monthly, --yearly: the newest backup\n"
	  "of each of the last N days, ISO weeks, months, years that have one, in --timezone,\n"
	  "default UTC; FULL: full backups only; N, when given, keeps the N newest too) prints its\n"
	  "plan as a table: each backup, kept or not, why, the WAL it keeps. --pitr-window 7d\n"
	  "keeps the WAL continuous only from the newest backup that ended before the window (kept\n"
	  "too); each older kept backup keeps only its own WAL, from its start to its end, and\n"
	  "restores to its consistency point; backup-fetch --target-* before the window is\n"
	  "refused naming it (walc_retention.json records it).",
	  true, cmd_delete, delete_words_ok },
	{ "catchup-push", "PGDATA", 1, 1, catchup_push_opts,
	  "store what a stopped standby lacks: the primary's changes since its LSN",
	  "Run on the primary, with PGDATA its data directory and --from-lsn the standby's LSN (its\n"
	  "pg_controldata \"Minimum recovery ending location\", or \"Latest checkpoint's REDO\n"
	  "location\"): a backup as backup-push takes one, into catchup_005/, in which every\n"
	  "relation file holds only the pages changed since that LSN and every other file is\n"
	  "whole; pg_hba.conf, postgresql.conf and postgresql.auto.conf are left out (the\n"
	  "standby keeps its own). Apply it with catchup-fetch on the standby.",
	  true, cmd_catchup_push, NULL },
	{ "catchup-fetch", "PGDATA NAME", 2, 2, catchup_fetch_opts,
	  "bring a stopped standby up to date from a catchup backup",
	  "Applies catchup backup NAME (walc's or WAL-G's catchup-push) onto PGDATA, the standby's\n"
	  "data directory: stopped cleanly, of the backup's cluster, holding every change up to\n"
	  "the backup's --from-lsn (by its pg_control), on the backup's timeline or on one the\n"
	  "backup's timeline branched from after the standby's end (the archived history file\n"
	  "says so); anything else is refused before a file changes. Every file and increment is\n"
	  "downloaded beside its place and checked against files_metadata.json first; only then\n"
	  "are the standby's files replaced or written page by page, the relation files the\n"
	  "primary no longer has removed, and pg_control written last (it is absent, and a marker\n"
	  "says so, until a catchup-fetch completes). The standby's configuration, its\n"
	  "standby.signal and its tablespace links stay. Then start it: it recovers from the\n"
	  "backup's start and streams again.",
	  true, cmd_catchup_fetch, NULL },
	{ "catchup-list", "", 0, 0, backup_list_opts, "list catchup backups",
	  "Lists catchup_005/ as backup-list lists base backups.", true, cmd_catchup_list, NULL },
	{ "catchup-send", "PGDATA HOST:PORT", 0, ARGS_MAX_POS, none,
	  "not supported by walc: use catchup-push and catchup-fetch",
	  "WAL-G's direct transfer to catchup-receive speaks Go's gob encoding over an\n"
	  "unauthenticated TCP connection; walc does not implement it. catchup-push on the primary\n"
	  "and catchup-fetch on the standby do the same through the repository.",
	  false, cmd_catchup_unsupported, NULL },
	{ "catchup-receive", "PGDATA PORT", 0, ARGS_MAX_POS, none,
	  "not supported by walc: use catchup-push and catchup-fetch",
	  "See catchup-send.", false, cmd_catchup_unsupported, NULL },
	{ "backup-mark", "NAME", 1, 1, backup_mark_opts, "make a backup permanent (or not)",
	  "Permanent backups survive delete. Marking a delta permanent marks its whole chain; a\n"
	  "backup cannot become impermanent while a permanent delta is based on it. Updates\n"
	  "metadata.json and (unlike WAL-G) the sentinel too.",
	  true, cmd_backup_mark, NULL },
	{ "st",
	  "ls [FOLDER] | get KEY FILE | cat KEY | put FILE [KEY] | rm KEY|PREFIX | stat KEY |"
	  " check read [KEY...] | check write",
	  1, ARGS_MAX_POS, st_opts, "storage tools on raw repository objects",
	  "ls prints WAL-G's listing (type, size, last modified, name relative to FOLDER). get and\n"
	  "cat decrypt and decompress (by extension) unless --no-decrypt/--no-decompress; put\n"
	  "compresses and encrypts like walc's own objects, appending the codec's extension to KEY\n"
	  "(--no-compress, --no-encrypt), and refuses to overwrite without -f; rm removes one\n"
	  "object or everything under a folder. check read lists the repository and checks that\n"
	  "each KEY exists; check write stores and removes an object of a random name. Keys are\n"
	  "relative to the repository; a leading / is the repository's root, as in WAL-G.",
	  true, cmd_st, st_words_ok },
	{ "copy", "", 0, 0, copy_opts, "copy backups and their WAL into another repository, as stored",
	  "Copies each backup (every object of it and of its delta's bases) and the WAL it needs\n"
	  "(the segment before its start to its finish segment, every timeline history; with\n"
	  "--with-history everything after too) from the repository --from's WAL-G configuration\n"
	  "file names into the one --to's names, across stores (file, S3, GCS, Azure), as stored:\n"
	  "still compressed and encrypted, no key needed. Only the files' storage settings are\n"
	  "read (credentials the files do not set come from the environment). Each object is\n"
	  "checked after its copy (its size, and its MD5 where the store keeps one); inside one S3\n"
	  "endpoint the store copies it (CopyObject). A backup's sentinel is written last, after\n"
	  "its base's, so an interrupted copy lists no backup it does not hold whole; a rerun\n"
	  "copies only what is missing. Objects the target holds with other sizes are an error\n"
	  "before anything is copied (but metadata.json and sentinels, which backup-mark changes).\n"
	  "With WALG_PUSHGATEWAY_URL each run pushes walc_copy_lag_seconds: how long the oldest\n"
	  "object it copied had been in the first repository.",
	  false, cmd_copy, NULL },
	{ "rekey", "[NAME|LATEST...]", 0, ARGS_MAX_POS, none,
	  "re-encrypt the repository from older keys to the current one (walc only)",
	  "Key rotation. Reads try the current key, then the older keys WALG_OLD_KEY_PATHS lists\n"
	  "(libsodium and OpenPGP alike; writes use the current key only). rekey re-encrypts every\n"
	  "object an older key opens (WAL files, tar partitions; of the named backups only, when\n"
	  "given) with the current key: each is first copied whole under walc_rekey/ (a folder\n"
	  "WAL-G ignores), then put back in place atomically once the copy decrypts with the\n"
	  "current key alone to the bytes the old object held: no object is ever readable by\n"
	  "neither key. Objects of the current key are left alone, so a run that was stopped is\n"
	  "finished by running it again. Once every object is done, walc_cluster.json records\n"
	  "the current key's method. An object no key opens is named (PROBLEM) and left as it\n"
	  "is; exit status 1 then. Then the older key can be removed from the ring.",
	  true, cmd_rekey, NULL },
	{ "daemon", "SOCKET", 1, 1, none,
	  "serve archiving over a socket (archive_library = 'walc_archive')",
	  "Listens on the UNIX socket SOCKET for WAL-G's daemon protocol: the walc_archive module\n"
	  "(PostgreSQL 15+ archive_library) sends each file to archive and walc stores it as\n"
	  "wal-push would, with no process per segment; wal-fetch requests are served too. PGDATA\n"
	  "must be set. With WALG_METRICS_ADDRESS=host:port it also serves Prometheus /metrics\n"
	  "and /healthz. Stops on SIGINT or SIGTERM.",
	  true, cmd_daemon, NULL },
	{ "daemon-client", "SOCKET wal-push WAL_NAME | SOCKET wal-fetch WAL_NAME DESTINATION", 3, 4,
	  daemon_client_opts, "ask a walc (or WAL-G) daemon to archive or restore one file",
	  "WAL-G's walg-daemon-client in walc: sends one wal-push (a file name in PGDATA/pg_wal,\n"
	  "PostgreSQL's %f) or wal-fetch (%f %p) request to the daemon listening on SOCKET and\n"
	  "exits as the daemon answers: 0 done, 74 when the archive has no such file, 1 otherwise.\n"
	  "Needs no configuration: the daemon has it.",
	  false, cmd_daemon_client, NULL },
	{ "wal-receive", "", 0, 0, none, "stream WAL over replication into the repository",
	  "Connects for physical replication (libpq's PG* settings) through the slot WALG_SLOTNAME\n"
	  "(default walg; created if missing) and stores each WAL segment as wal-push would, once\n"
	  "the segment is complete. The slot learns a segment is flushed only after it is stored,\n"
	  "so the server keeps whatever is not: a restart goes on where the slot stands. When the\n"
	  "server's timeline ends (a promoted standby), the segment so far is stored as .partial\n"
	  "with the new timeline's history file, and streaming goes on. Runs until SIGINT or\n"
	  "SIGTERM; exits non-zero when the connection or an upload fails, and when the slot lost\n"
	  "WAL not yet stored (invalidated past max_slot_wal_keep_size: wal_status lost), naming\n"
	  "the missing segments, recorded for wal-verify.",
	  true, cmd_wal_receive, NULL },
	{ "wal-restore", "TARGET-PGDATA SOURCE-PGDATA", 2, 2, none,
	  "before pg_rewind: restore the WAL it needs into both clusters",
	  "After a failover, before `pg_rewind -D TARGET-PGDATA --source-pgdata=SOURCE-PGDATA`\n"
	  "(TARGET the old primary, SOURCE the promoted standby, both stopped cleanly): finds\n"
	  "where their timelines diverge (their history files), reads TARGET's WAL back to the\n"
	  "last checkpoint before that point, and restores from the archive every WAL file missing\n"
	  "from TARGET's pg_wal from that checkpoint to TARGET's end (what pg_rewind reads) and\n"
	  "from SOURCE's pg_wal to SOURCE's end (what pg_rewind copies and the rewound cluster\n"
	  "replays), each checked as wal-fetch checks one. Writes nothing but new files in the\n"
	  "two pg_wal directories; refuses running clusters, clusters of different systems and\n"
	  "clusters on one timeline. Exit 1 when a needed file is neither there nor archived.",
	  true, cmd_wal_restore, NULL },
	{ "env", "", 0, 0, none, "list every setting walc reads",
	  "Prints each setting with its current value (secrets masked) and where it came from,\n"
	  "its default and meaning, then the WAL-G settings that are set but walc does not\n"
	  "implement. Settings come from flags (--walg-s3-prefix=...), the environment, then the\n"
	  "configuration file (--config FILE, WALG_CONFIG_PATH or ~/.walg.json).",
	  false, cmd_env, NULL },
	/* Hidden (no summary): started by wal-fetch, as WAL-G's wal-prefetch is. */
	{ "wal-prefetch", "WAL_NAME DESTINATION", 2, 2, wal_fetch_opts, NULL,
	  "Prefetches the segments after WAL_NAME beside DESTINATION; wal-fetch starts it.", true,
	  cmd_wal_prefetch, NULL },
	{ "help", "[COMMAND]", 0, 1, none, "show help", "Shows the commands, or one command's help.",
	  false, cmd_help, NULL },
	{ "version", "", 0, 0, none, "print the version", "Same as --version.", false, cmd_version, NULL },
};

#define NCMDS (sizeof(cmd_table) / sizeof(cmd_table[0]))

const command *command_find(const char *name)
{
	for (size_t i = 0; i < NCMDS; i++)
		if (strcmp(cmd_table[i].name, name) == 0)
			return &cmd_table[i];
	return NULL;
}

const command *const *command_all(void)
{
	static const command *all[NCMDS + 1];
	for (size_t i = 0; i < NCMDS; i++)
		all[i] = &cmd_table[i];
	all[NCMDS] = NULL;
	return all;
}

int command_fail(err_code rc)
{
	if (rc == E_OK)
		return 0;
	log_error("%s", err_msg());
	return 1;
}

/* walc: PostgreSQL backup and WAL archiving, configured by environment variables. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/walc/commands.h"

static const command cmd_table[] = {
	{ "wal-push", "wal-push WAL_FILE_PATH", "archive one WAL file (archive_command = 'walc wal-push %p')",
	  "Compresses (WALG_COMPRESSION_METHOD) and, with a libsodium key, encrypts the file, then\n"
	  "stores it as wal_005/<name>.<ext>. With WALG_PREVENT_WAL_OVERWRITE=true, and always for\n"
	  ".history files, an archived copy with different content is an error and stays as it was;\n"
	  "an identical copy is success without upload.",
	  true, cmd_wal_push },
	{ "wal-fetch", "wal-fetch WAL_NAME DESTINATION",
	  "restore one WAL file (restore_command = 'walc wal-fetch %f %p')",
	  "Finds wal_005/<name> whatever compression it was stored with, decrypts, decompresses and\n"
	  "writes DESTINATION atomically. Exit 74 when the archive has no such file, 1 on any other\n"
	  "failure (DESTINATION is then not created).",
	  true, cmd_wal_fetch },
	{ "wal-show", "wal-show [--detailed-json] [--without-backups]",
	  "show archived WAL per timeline, with gaps",
	  "Lists wal_005/ by timeline: parent and switch point (from .history files), first and\n"
	  "last segment, how many there are and how many the range needs (STATUS LOST_SEGMENTS\n"
	  "when some are missing), and how many backups start on each timeline.",
	  true, cmd_wal_show },
	{ "wal-verify", "wal-verify integrity|timeline... [--json]",
	  "check that the archive can restore up to now",
	  "integrity: every segment from the oldest backup's start to the cluster's current one is\n"
	  "archived (FOUND; MISSING_UPLOADING within WALG_UPLOAD_CONCURRENCY of now; MISSING_DELAYED\n"
	  "within WALG_INTEGRITY_MAX_DELAYED_WALS; MISSING_LOST otherwise). timeline: the highest\n"
	  "timeline in storage is the cluster's. Connects with the PG* variables. Unlike WAL-G, walc\n"
	  "exits 1 when a check reports FAILURE.",
	  true, cmd_wal_verify },
	{ "backup-push",
	  "backup-push PGDATA [--full] [--permanent] [--verify] [--add-user-data JSON]"
	  " [--delta-from-name NAME] [--delta-from-user-data JSON]",
	  "take a base backup of a running cluster",
	  "Starts a non-exclusive backup over a libpq session (PG* variables), streams PGDATA and\n"
	  "its tablespaces as tar partitions (WALG_TAR_SIZE_THRESHOLD, WALG_UPLOAD_DISK_CONCURRENCY\n"
	  "packers; compressed, then encrypted), stops the backup, and writes metadata and the\n"
	  "sentinel last: a backup exists only once its sentinel does. SIGINT or SIGTERM stop it\n"
	  "with no sentinel. PGDATA must be the server's data_directory.\n\n"
	  "With WALG_DELTA_MAX_STEPS > 0 the backup is a delta of the latest one (or of the latest\n"
	  "full with WALG_DELTA_ORIGIN=LATEST_FULL, or of --delta-from-name): relation files hold\n"
	  "only pages changed since the base started; files unchanged since well before the base\n"
	  "are not stored at all. --verify checks every page's checksum and records corrupt blocks.",
	  true, cmd_backup_push },
	{ "backup-fetch", "backup-fetch DESTINATION NAME|LATEST [--restore-spec FILE] [--delta [--force]]",
	  "restore a base backup into an empty directory",
	  "Restores backup NAME (or the newest, LATEST) into DESTINATION, which must be empty or\n"
	  "absent. A delta backup is applied forward: its full backup first, then each delta.\n"
	  "Tablespaces go where the backup's spec says, or where --restore-spec FILE (WAL-G's spec\n"
	  "JSON) puts them. pg_control is written last; WALG_DOWNLOAD_CONCURRENCY streams run at\n"
	  "once. Then add restore_command = 'walc wal-fetch %f %p' and recovery.signal.\n\n"
	  "--delta (or WALG_DELTA_RESTORE=true): DESTINATION holds an old copy of the cluster,\n"
	  "stopped. Files whose size and checksum match the backup's are kept, the others are\n"
	  "restored, files the backup does not have are removed, and tar parts holding nothing\n"
	  "needed are not downloaded. A directory of another cluster is refused unless --force.",
	  true, cmd_backup_fetch },
	{ "backup-list", "backup-list [--pretty] [--json] [--detail]", "list base backups",
	  "Lists backups with a sentinel, oldest first (by the sentinel's time), in WAL-G's columns.\n"
	  "--detail adds metadata.json fields; --json prints a JSON array; --pretty a framed table.",
	  true, cmd_backup_list },
	{ "delete",
	  "delete retain [FULL|FIND_FULL] N [--after TIME|NAME] | before [FIND_FULL] NAME|TIME |"
	  " everything [FORCE] | target [FIND_FULL] NAME | target --target-user-data JSON |"
	  " garbage [ARCHIVES|BACKUPS]  [--confirm]",
	  "retention: delete old backups and WAL (a dry run without --confirm)",
	  "retain N keeps the N newest backups (FULL: N newest fulls; FIND_FULL: back to the full\n"
	  "of the N-th), --after also keeps everything since a time or backup; before deletes\n"
	  "what is older than a backup or time; target deletes one backup and every delta built\n"
	  "on it (FIND_FULL: its whole chain), never WAL; garbage deletes leftovers older than the\n"
	  "oldest backup (failed pushes' objects, unneeded WAL); everything deletes basebackups_005/\n"
	  "and wal_005/ (FORCE: even permanent backups). Permanent backups and the WAL they need\n"
	  "survive every mode but everything FORCE, and every ancestor of a kept delta is kept.\n"
	  "Unlike WAL-G, backups are ordered by their start time (metadata.json), so a timeline\n"
	  "reset cannot make old backups look new; --use-sentinel-time is accepted and implied.",
	  true, cmd_delete },
	{ "backup-mark", "backup-mark NAME [-i|--impermanent]", "make a backup permanent (or not)",
	  "Permanent backups survive delete. Marking a delta permanent marks its whole chain; a\n"
	  "backup cannot become impermanent while a permanent delta is based on it. Updates\n"
	  "metadata.json and (unlike WAL-G) the sentinel too.",
	  true, cmd_backup_mark },
	{ "st", "st ls [-r] [PREFIX] | get KEY FILE | cat KEY | put FILE KEY [-f] | rm KEY|PREFIX",
	  "storage tools on raw repository objects",
	  "get and cat decrypt and decompress (by extension) unless --no-decrypt/--no-decompress;\n"
	  "put compresses and encrypts like walc's own objects, appending the codec's extension to\n"
	  "KEY (--no-compress, --no-encrypt), and refuses to overwrite without -f; rm removes one\n"
	  "object or everything under a folder.",
	  true, cmd_st },
	{ "daemon", "daemon SOCKET", "serve archiving over a socket (archive_library = 'walc_archive')",
	  "Listens on the UNIX socket SOCKET for WAL-G's daemon protocol: the walc_archive module\n"
	  "(PostgreSQL 15+ archive_library) sends each file to archive and walc stores it as\n"
	  "wal-push would, with no process per segment; wal-fetch requests are served too. PGDATA\n"
	  "must be set. With WALG_METRICS_ADDRESS=host:port it also serves Prometheus /metrics\n"
	  "and /healthz. Stops on SIGINT or SIGTERM.",
	  true, cmd_daemon },
	{ "env", "env", "list every environment variable walc reads",
	  "Prints each variable with its current value (secrets masked), default and meaning.",
	  false, cmd_env },
	{ "help", "help [COMMAND]", "show help", "Shows the commands, or one command's help.",
	  false, cmd_help },
	{ "version", "version", "print the version", "Same as --version.", false, cmd_version },
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

/* WALG_LOG_DESTINATION: the log (stderr) appended to a file, as WAL-G does. */
static err_code redirect_log(const char *path)
{
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
	if (fd < 0)
		return err_errno(E_CONFIG, errno, "WALG_LOG_DESTINATION: %s", path);
	err_code rc = dup2(fd, STDERR_FILENO) < 0
		? err_errno(E_CONFIG, errno, "WALG_LOG_DESTINATION: %s", path)
		: E_OK;
	close(fd);
	return rc;
}

static bool wants_help(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
			return true;
	return false;
}

int main(int argc, char **argv)
{
	config cfg;

	signal(SIGPIPE, SIG_IGN);
	if (argc < 2) {
		fprintf(stderr, "usage: walc COMMAND [ARGS]; see walc help\n");
		return 1;
	}
	const char *name = argv[1];
	if (strcmp(name, "--version") == 0 || strcmp(name, "-v") == 0)
		name = "version";
	else if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0)
		name = "help";
	const command *cmd = command_find(name);
	log_setup(LOG_INFO, false, cmd != NULL ? cmd->name : "walc");
	if (cmd == NULL) {
		log_error("unknown command \"%s\"; see walc help", argv[1]);
		return 1;
	}
	/* Help needs no configuration at all: `walc backup-push --help` works anywhere. */
	if (cmd->run == cmd_help || cmd->run == cmd_version)
		return cmd->run(NULL, argc - 1, argv + 1);
	if (wants_help(argc - 1, argv + 1)) {
		command_print_help(cmd, stdout);
		return 0;
	}

	err_code rc = config_load(&cfg, cmd->needs_storage);
	/* The log's shape comes first, so that warnings and the error below have it. */
	if (cfg.logging_loaded) {
		if (cfg.log_destination != NULL) {
			err_code lrc = redirect_log(cfg.log_destination);
			if (lrc != E_OK && rc == E_OK)
				rc = lrc;
		}
		log_setup(cfg.log_level, cfg.log_json, cmd->name);
		log_claim_stderr();
	}
	/* Unknown names are reported even when another setting is wrong. */
	config_warn_unknown();
	if (rc != E_OK) {
		/* `walc env` still lists what is set, so the mistake can be found. */
		if (cmd->run == cmd_env)
			cmd_env(NULL, argc - 1, argv + 1);
		int code = command_fail(rc);
		config_free(&cfg);
		return code;
	}
	config_log_env();

	int code = cmd->run(&cfg, argc - 1, argv + 1);
	config_free(&cfg);
	return code;
}

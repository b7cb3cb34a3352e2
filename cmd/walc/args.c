/*
 * Command lines as cobra (WAL-G's parser) reads them: --name value, --name=value, -s value,
 * --flag, --flag=true|false, "--" before positional arguments that start with "-"; options
 * before, between or after the positional arguments.
 */
#include <stdlib.h>
#include <string.h>

#include "cmd/walc/commands.h"

static int opt_index(const command *c, const char *name, size_t len, char shorthand)
{
	for (int i = 0; c->opts != NULL && c->opts[i].name != NULL; i++) {
		const opt *o = &c->opts[i];
		if (shorthand != 0 ? o->shorthand == shorthand
						   : strlen(o->name) == len && strncmp(o->name, name, len) == 0)
			return i;
	}
	return -1;
}

const char *arg(const args *a, const char *name)
{
	int i = opt_index(a->cmd, name, strlen(name), 0);
	return i >= 0 ? a->val[i] : NULL;
}

bool arg_set(const args *a, const char *name)
{
	return arg(a, name) != NULL;
}

/* A flag given as --flag=VALUE: Go's ParseBool words. */
static err_code flag_value(const char *name, const char *v, const char **out)
{
	bool on;
	TRY(config_parse_bool(name, v, true, &on));
	*out = on ? "" : NULL;
	return E_OK;
}

err_code args_parse(const command *c, int argc, char **argv, args *out)
{
	memset(out, 0, sizeof(*out));
	out->cmd = c;
	bool only_pos = false;
	for (int i = 0; i < argc; i++) {
		const char *w = argv[i];
		if (only_pos || w[0] != '-' || w[1] == '\0') {
			if (out->npos == ARGS_MAX_POS || out->npos == c->max_pos)
				return err_set(E_CONFIG, "%s: unexpected argument \"%s\"", c->name, w);
			out->pos[out->npos++] = w;
			continue;
		}
		if (strcmp(w, "--") == 0) {
			only_pos = true;
			continue;
		}
		bool lng = w[1] == '-';
		const char *name = w + (lng ? 2 : 1);
		const char *eq = lng ? strchr(name, '=') : NULL;
		size_t len = eq ? (size_t)(eq - name) : strlen(name);
		if (!lng && len != 1)
			return err_set(E_CONFIG, "%s: unknown option %s", c->name, w);
		int k = opt_index(c, name, len, lng ? 0 : name[0]);
		if (k < 0)
			return err_set(E_CONFIG, "%s: unknown option %s", c->name, w);
		const opt *o = &c->opts[k];
		if (o->value == NULL) {
			if (eq != NULL)
				TRY(flag_value(w, eq + 1, &out->val[k]));
			else
				out->val[k] = "";
		} else if (eq != NULL) {
			out->val[k] = eq + 1;
		} else if (i + 1 < argc) {
			out->val[k] = argv[++i];
		} else {
			return err_set(E_CONFIG, "%s: %s needs a value (%s)", c->name, w, o->value);
		}
		if (o->help == NULL)
			log_debug("%s: %s has no effect in walc (WAL-G's; walc does not need it)", c->name,
					  w);
	}
	if (out->npos < c->min_pos)
		return err_set(E_CONFIG, "%s: missing arguments", c->name);
	return E_OK;
}

static void print_usage_line(const command *c, FILE *out)
{
	fprintf(out, "usage: walc %s%s%s%s\n", c->name, c->positional[0] ? " " : "", c->positional,
			c->opts != NULL && c->opts[0].name != NULL ? " [options]" : "");
}

void command_print_help(const command *c, FILE *out)
{
	print_usage_line(c, out);
	fprintf(out, "\n%s\n", c->help);
	if (c->opts == NULL || c->opts[0].name == NULL)
		return;
	fprintf(out, "\nOptions:\n");
	bool noops = false;
	for (const opt *o = c->opts; o->name != NULL; o++) {
		if (o->help == NULL) {
			noops = true;
			continue;
		}
		char head[96], shorthand[8] = "    ";
		if (o->shorthand)
			snprintf(shorthand, sizeof(shorthand), "-%c, ", o->shorthand);
		snprintf(head, sizeof(head), "%s--%s%s%s", shorthand, o->name, o->value ? " " : "",
				 o->value ? o->value : "");
		fprintf(out, "  %-32s %s\n", head, o->help);
	}
	if (noops) {
		fprintf(out, "\nAccepted for WAL-G's command lines, without effect in walc:");
		for (const opt *o = c->opts; o->name != NULL; o++)
			if (o->help == NULL)
				fprintf(out, " --%s", o->name);
		fprintf(out, "\n");
	}
}

int command_usage(const command *c, const char *why)
{
	char line[1024];
	FILE *f = fmemopen(line, sizeof(line), "w");
	if (f != NULL) {
		print_usage_line(c, f);
		fclose(f);
		line[strcspn(line, "\n")] = '\0';
		/* One line: what is wrong, then the usage. */
		log_error("%s%s%s; see walc help %s", why ? why : "", why ? "; " : "", line, c->name);
	}
	return 1;
}

const char *target_storage(const config *cfg, const args *a)
{
	const char *v = arg(a, "target-storage");
	return v != NULL && v[0] != '\0' ? v : cfg->storage.target_storage;
}

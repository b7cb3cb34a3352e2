/* Text tables in the two shapes WAL-G prints: space-padded columns and framed ASCII. */
#include "internal/core/core.h"

#include <stdlib.h>
#include <string.h>

struct table {
	int ncols;
	const char *const *headers;
	const bool *right;
	char **cells; /* rows x ncols */
	size_t rows;
	size_t cap;
};

table *table_new(int ncols, const char *const *headers, const bool *right)
{
	table *t = xcalloc(1, sizeof(*t));
	t->ncols = ncols;
	t->headers = headers;
	t->right = right;
	return t;
}

void table_add(table *t, const char *const *cells)
{
	if (t->rows == t->cap) {
		t->cap = t->cap ? t->cap * 2 : 16;
		t->cells = xrealloc(t->cells, t->cap * (size_t)t->ncols * sizeof(char *));
	}
	for (int c = 0; c < t->ncols; c++)
		t->cells[t->rows * (size_t)t->ncols + (size_t)c] = xstrdup(cells[c] ? cells[c] : "");
	t->rows++;
}

static const char *cell(const table *t, size_t row, int col)
{
	return row == 0 ? t->headers[col] : t->cells[(row - 1) * (size_t)t->ncols + (size_t)col];
}

static void rule(FILE *out, const size_t *width, int ncols)
{
	for (int c = 0; c < ncols; c++) {
		fputc('+', out);
		for (size_t k = 0; k < width[c] + 2; k++)
			fputc('-', out);
	}
	fputs("+\n", out);
}

void table_print(const table *t, FILE *out, bool framed)
{
	size_t *width = xcalloc((size_t)t->ncols, sizeof(size_t));
	for (size_t r = 0; r <= t->rows; r++)
		for (int c = 0; c < t->ncols; c++)
			if (strlen(cell(t, r, c)) > width[c])
				width[c] = strlen(cell(t, r, c));
	if (framed)
		rule(out, width, t->ncols);
	for (size_t r = 0; r <= t->rows; r++) {
		for (int c = 0; c < t->ncols; c++) {
			/* Headers are always left-aligned; data follows the column's alignment. */
			bool right = r > 0 && t->right != NULL && t->right[c];
			const char *v = cell(t, r, c);
			if (framed)
				fprintf(out, right ? "| %*s " : "| %-*s ", (int)width[c], v);
			else if (c + 1 < t->ncols)
				fprintf(out, right ? "%*s " : "%-*s ", (int)width[c], v);
			else
				fprintf(out, "%s", v);
		}
		fputs(framed ? "|\n" : "\n", out);
		if (framed && r == 0)
			rule(out, width, t->ncols);
	}
	if (framed)
		rule(out, width, t->ncols);
	free(width);
}

void table_free(table *t)
{
	if (t == NULL)
		return;
	for (size_t i = 0; i < t->rows * (size_t)t->ncols; i++)
		free(t->cells[i]);
	free(t->cells);
	free(t);
}

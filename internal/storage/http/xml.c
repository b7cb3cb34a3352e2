/*
 * XML answers of the object stores (S3, STS, Azure Blob), parsed with expat into (path, text)
 * events. The input is untrusted: documents are capped, DOCTYPEs refused (no entity tricks),
 * nesting and text bounded.
 */
#include "internal/storage/http/http.h"

#include <expat.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define XML_MAX_DEPTH 16
#define XML_PATH_MAX 512

typedef struct xml_state {
	XML_Parser p;
	xml_cb cb;
	void *ctx;
	char path[XML_PATH_MAX];
	size_t plen[XML_MAX_DEPTH + 1];
	int depth;
	char *text;
	size_t tlen;
	const char *fail;
} xml_state;

static void xml_stop(xml_state *st, const char *why)
{
	if (st->fail == NULL)
		st->fail = why;
	XML_StopParser(st->p, XML_FALSE);
}

static void XMLCALL on_start(void *ud, const XML_Char *name, const XML_Char **attrs)
{
	xml_state *st = ud;
	(void)attrs;
	if (st->fail != NULL)
		return;
	if (st->depth >= XML_MAX_DEPTH)
		return xml_stop(st, "nested too deeply");
	/* Namespaced names (with a separator) are not expected; keep the local part. */
	const char *local = strrchr(name, ':');
	local = local ? local + 1 : name;
	size_t cur = st->plen[st->depth], n = strlen(local);
	if (cur + 1 + n + 1 > XML_PATH_MAX)
		return xml_stop(st, "element path too long");
	st->path[cur] = '/';
	memcpy(st->path + cur + 1, local, n + 1);
	st->depth++;
	st->plen[st->depth] = cur + 1 + n;
	st->tlen = 0;
	st->text[0] = '\0';
}

static void XMLCALL on_end(void *ud, const XML_Char *name)
{
	xml_state *st = ud;
	(void)name;
	if (st->fail != NULL || st->depth == 0)
		return;
	st->cb(st->ctx, st->path, st->text);
	st->depth--;
	st->path[st->plen[st->depth]] = '\0';
	st->tlen = 0;
	st->text[0] = '\0';
}

static void XMLCALL on_text(void *ud, const XML_Char *s, int len)
{
	xml_state *st = ud;
	if (st->fail != NULL)
		return;
	if (st->tlen + (size_t)len >= XML_TEXT_MAX)
		return xml_stop(st, "element text too long");
	memcpy(st->text + st->tlen, s, (size_t)len);
	st->tlen += (size_t)len;
	st->text[st->tlen] = '\0';
}

static void XMLCALL on_doctype(void *ud, const XML_Char *name, const XML_Char *sysid,
							   const XML_Char *pubid, int has_internal)
{
	(void)name, (void)sysid, (void)pubid, (void)has_internal;
	xml_stop(ud, "DOCTYPE not allowed");
}

static void XMLCALL on_entity(void *ud, const XML_Char *name, int is_param, const XML_Char *value,
							  int vlen, const XML_Char *base, const XML_Char *sysid,
							  const XML_Char *pubid, const XML_Char *notation)
{
	(void)name, (void)is_param, (void)value, (void)vlen, (void)base, (void)sysid, (void)pubid,
		(void)notation;
	xml_stop(ud, "entity declarations not allowed");
}

err_code xml_parse(const char *doc, size_t len, xml_cb cb, void *ctx)
{
	if (len > HTTP_BODY_MAX)
		return err_set(E_CORRUPT, "XML answer of %zu bytes exceeds the %u-byte limit", len,
					   HTTP_BODY_MAX);
	xml_state st = { 0 };
	st.p = XML_ParserCreate("UTF-8");
	if (st.p == NULL)
		return err_set(E_FAIL, "cannot create an XML parser");
	st.cb = cb;
	st.ctx = ctx;
	st.text = xmalloc(XML_TEXT_MAX);
	st.text[0] = '\0';
	XML_SetUserData(st.p, &st);
	XML_SetElementHandler(st.p, on_start, on_end);
	XML_SetCharacterDataHandler(st.p, on_text);
	XML_SetStartDoctypeDeclHandler(st.p, on_doctype);
	XML_SetEntityDeclHandler(st.p, on_entity);
	err_code rc = E_OK;
	if (XML_Parse(st.p, doc, (int)len, XML_TRUE) != XML_STATUS_OK || st.fail != NULL) {
		rc = err_set(E_CORRUPT, "malformed XML answer: %s (line %lu)",
					 st.fail ? st.fail : XML_ErrorString(XML_GetErrorCode(st.p)),
					 (unsigned long)XML_GetCurrentLineNumber(st.p));
	}
	XML_ParserFree(st.p);
	free(st.text);
	return rc;
}

/* Error */

typedef struct err_ctx {
	char *code, *msg;
	size_t codesz, msgsz;
	bool is_error;
} err_ctx;

static void copy_text(char *dst, size_t sz, const char *src)
{
	if (sz == 0)
		return;
	size_t n = strlen(src);
	if (n >= sz)
		n = sz - 1;
	memcpy(dst, src, n);
	dst[n] = '\0';
	/* Keep messages on one printable line. */
	for (char *p = dst; *p; p++)
		if ((unsigned char)*p < 0x20)
			*p = ' ';
}

static void error_cb(void *vctx, const char *path, const char *text)
{
	err_ctx *c = vctx;
	if (strcmp(path, "/Error") == 0)
		c->is_error = true;
	else if (strcmp(path, "/Error/Code") == 0)
		copy_text(c->code, c->codesz, text);
	else if (strcmp(path, "/Error/Message") == 0)
		copy_text(c->msg, c->msgsz, text);
	/* STS: ErrorResponse/Error/Code */
	else if (strcmp(path, "/ErrorResponse/Error/Code") == 0) {
		c->is_error = true;
		copy_text(c->code, c->codesz, text);
	} else if (strcmp(path, "/ErrorResponse/Error/Message") == 0)
		copy_text(c->msg, c->msgsz, text);
}

bool xml_error(const char *doc, size_t len, char *code, size_t codesz, char *msg,
				  size_t msgsz)
{
	err_ctx c = { code, msg, codesz, msgsz, false };
	if (codesz)
		code[0] = '\0';
	if (msgsz)
		msg[0] = '\0';
	if (len == 0)
		return false;
	char saved[ERR_MSG_MAX];
	err_code last = err_last();
	snprintf(saved, sizeof(saved), "%s", err_msg());
	bool ok = xml_parse(doc, len, error_cb, &c) == E_OK;
	/* A malformed error body is not itself the error to report. */
	if (last != E_OK)
		err_set(last, "%s", saved);
	else
		err_clear();
	return ok && c.is_error && code[0] != '\0';
}

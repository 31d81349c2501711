#include "status.h"

#include <stdarg.h>

enum bg_status bg_failv(struct bg_err *err, enum bg_status status, const char *prefix,
			const char *fmt, va_list ap)
{
	if (err) {
		int n = snprintf(err->msg, sizeof err->msg, "%s", prefix ? prefix : "");
		size_t off = n < 0 ? 0 : (size_t)n < sizeof err->msg ? (size_t)n : sizeof err->msg - 1;
		vsnprintf(err->msg + off, sizeof err->msg - off, fmt, ap);
		err->status = status;
	}
	return status;
}

enum bg_status bg_fail(struct bg_err *err, enum bg_status status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	bg_failv(err, status, NULL, fmt, ap);
	va_end(ap);
	return status;
}

const char *bg_status_name(enum bg_status s)
{
	switch (s) {
	case BG_OK: return "ok";
	case BG_ERR_IO: return "i/o error";
	case BG_ERR_FORMAT: return "format error";
	case BG_ERR_UNSUPPORTED: return "unsupported";
	case BG_ERR_INVALID: return "invalid argument";
	case BG_ERR_NOMEM: return "out of memory";
	case BG_ERR_DEVICE: return "device error";
	case BG_ERR_CAPACITY: return "capacity exceeded";
	}
	return "unknown error";
}

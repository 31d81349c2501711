#include "status.h"

#include <stdarg.h>

enum bg_status bg_fail(struct bg_err *err, enum bg_status status, const char *fmt, ...)
{
	if (err) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof err->msg, fmt, ap);
		va_end(ap);
		err->status = status;
	}
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

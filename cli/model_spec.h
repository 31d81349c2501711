/* model_spec: what -m names, turned into what model_open takes.
 *
 * An hf:OWNER/REPO[:TAG|/FILE.gguf][@REVISION] name is resolved through the Hugging Face
 * hub cache, downloading when needed (core/io/hub.h), with the settings of the
 * environment (HF_ENDPOINT, HF_TOKEN, HF_HUB_CACHE, HF_HOME, HF_HUB_OFFLINE) and
 * --offline. While a file downloads, stderr shows a bar redrawn in place on a terminal,
 * or a line at every 10% otherwise; quiet shows nothing. Every other name passes
 * through unchanged.
 */
#ifndef BG_CLI_MODEL_SPEC_H
#define BG_CLI_MODEL_SPEC_H

#include <stdbool.h>

#include "status.h"

/* Sets *out to a malloc'd spec for model_open (NULL when spec is NULL: the built-in
 * model). On failure *out is NULL and err holds one sentence (the caller exits 3). */
enum bg_status model_spec_resolve(const char *spec, bool offline, bool quiet, char **out,
				  struct bg_err *err);

#endif

/* ref_outputs: reading llama.cpp's reference outputs (../shared/models/ref_outputs, see
 * its README.md) in the tests that compare against them. Header-only, static functions,
 * because each test program is one translation unit; include it after check.h.
 *
 *   ref_read_json(rel)              the parsed JSON at ../shared/<rel> (cJSON_Delete it)
 *   ref_json_ints(arr, out, max)    a JSON array of integers into out
 */
#ifndef BG_TEST_REF_OUTPUTS_H
#define BG_TEST_REF_OUTPUTS_H

#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>

#include "check.h"

/* The reference file rel (relative to ../shared), parsed. NULL after a SKIP line (or a
 * failed check under CI) when it is absent; NULL with a failed check when it cannot be
 * read or is not JSON. One check when the file exists. */
static inline cJSON *ref_read_json(const char *rel)
{
	const char *path = check_shared(rel);
	if (!path)
		return NULL;
	size_t len = 0;
	char *buf = check_read_file(path, &len);
	cJSON *j = buf ? cJSON_ParseWithLength(buf, len) : NULL;
	free(buf);
	CHECK(j != NULL, "parse %s", rel);
	return j;
}

/* Copies the first max numbers of the JSON array arr into out (truncated to int32) and
 * returns how many were copied: min(array size, max); 0 when arr is NULL or empty. */
static inline int ref_json_ints(const cJSON *arr, int32_t *out, int max)
{
	int n = 0;
	const cJSON *it;
	cJSON_ArrayForEach(it, arr)
	{
		if (n < max)
			out[n] = (int32_t)it->valuedouble;
		n++;
	}
	return n < max ? n : max;
}

#endif

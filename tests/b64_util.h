/* b64_util: decoding the base64 inputs that issues quote (a hostile GGUF file, a request
 * line) so that a regression test holds the exact bytes of the report. Test-only.
 *
 *   b64_decode(s, &len)   a malloc'd buffer of *len bytes (plus a NUL, not counted), or
 *                         NULL on a character outside the alphabet or a wrong length.
 */
#ifndef BG_TEST_B64_UTIL_H
#define BG_TEST_B64_UTIL_H

#include <stdlib.h>
#include <string.h>

static inline int b64_value(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	return c == '+' ? 62 : c == '/' ? 63 : -1;
}

static inline unsigned char *b64_decode(const char *s, size_t *len)
{
	size_t n = strlen(s);
	*len = 0;
	if (n % 4)
		return NULL;
	unsigned char *out = (unsigned char *)malloc(n / 4 * 3 + 1);
	if (!out)
		return NULL;
	size_t o = 0;
	for (size_t i = 0; i < n; i += 4) {
		int v[4];
		for (int k = 0; k < 4; k++) {
			v[k] = s[i + k] == '=' && i + 4 == n && k >= 2 ? 0 : b64_value(s[i + k]);
			if (v[k] < 0) {
				free(out);
				return NULL;
			}
		}
		unsigned x = (unsigned)v[0] << 18 | (unsigned)v[1] << 12 | (unsigned)v[2] << 6 |
			     (unsigned)v[3];
		out[o++] = (unsigned char)(x >> 16);
		if (s[i + 2] != '=')
			out[o++] = (unsigned char)(x >> 8);
		if (s[i + 3] != '=')
			out[o++] = (unsigned char)x;
	}
	out[o] = 0;
	*len = o;
	return out;
}

#endif

/* json_schema: a JSON schema -> a GBNF grammar (grammar.h) whose strings are JSON texts
 * that validate against the schema.
 *
 * Follows llama.cpp's json-schema-to-grammar where it applies: the same primitive rules
 * (value, object, array, string with its `char` rule, number, integer, boolean, null),
 * the same bounded whitespace `space ::= | " " | "\n"{1,2} [ \t]{0,20}` after every
 * token, object properties in the schema's order with the required ones first and the
 * optional ones as nested optional groups, and no properties beyond `properties` unless
 * `additionalProperties` allows them.
 *
 * Supported: type (one or a list of types), properties, required, additionalProperties
 * (false, true or a schema), enum, const, items with minItems/maxItems, prefixItems (and
 * items as a list), nested objects, anyOf/oneOf (oneOf is treated as anyOf: the branches
 * are not checked for exclusivity), $ref to "#", "#/$defs/..." and "#/definitions/..."
 * (recursion allowed), string minLength/maxLength and pattern (regex.h), the string
 * formats date, time, date-time and uuid, integer minimum/maximum/exclusiveMinimum/
 * exclusiveMaximum (each bound alone or both), and numbers with bounds, which are
 * produced as integers in the range (a valid subset). Annotations (title, description,
 * default, examples, $schema, $id, $comment, format values not listed) are ignored.
 * Refused with BG_ERR_UNSUPPORTED, naming the keyword and its JSON pointer, rather than
 * silently ignored: every other validation keyword (allOf, not, if, multipleOf,
 * uniqueItems, patternProperties, minProperties, contains, ...).
 */
#ifndef BG_JSON_SCHEMA_H
#define BG_JSON_SCHEMA_H

#include <cjson/cJSON.h>

#include "status.h"

#define JSON_SCHEMA_MAX_DEPTH 64	   /* nesting of schemas */
#define JSON_SCHEMA_MAX_GRAMMAR (1u << 20) /* bytes of GBNF produced */

/* Writes a malloc'd NUL-terminated GBNF text (root rule "root") to *gbnf. */
enum bg_status json_schema_to_gbnf(const cJSON *schema, char **gbnf, struct bg_err *err);

/* The grammar of any JSON object ({"type": "json_object"}, json_schema.h's rules). */
enum bg_status json_schema_object_gbnf(char **gbnf, struct bg_err *err);

#endif

/* SPDX-License-Identifier: BSD-3-Clause */
/* The HUGEPOOL_* options as this process sees them: read once from the
 * environment through the table of option-table.c, with for each option
 * whether it was left at its default, set, or set to something invalid
 * (mimalloc's options.c keeps the same record).  The rest of the library
 * and the preload ask here and never read the environment themselves.
 *
 * A bad value never aborts: it gets one warning naming the variable and the
 * default used instead.  In a setuid or setgid program (AT_SECURE) every
 * HUGEPOOL_* variable is ignored, with one warning: they come from the
 * unprivileged caller and name files the program would write with its
 * privileges.
 *
 * Everything is copied here, once, at load (the library's constructor, or
 * the preload's, runs before main): a program may rewrite its environment
 * afterwards (redis, nginx and postgres write their process title over the
 * environ strings), and a pointer into it would read that title. */
#define _GNU_SOURCE
#include "options.h"

#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h> /* environ */

#include "warn.h"

typedef enum { HP_OPTION_DEFAULT, HP_OPTION_SET, HP_OPTION_INVALID } hp_option_source;

typedef struct hp_option_state {
  long long value;
  const char *text; /* HP_TYPE_TEXT, and the text of a set or invalid value */
  hp_option_source source;
} hp_option_state;

static hp_option_state options[HP_OPT_COUNT];

/* The text values, copied out of the environment. */
static char text_store[2 * 4096 + 256];
static size_t text_used;

/* A copy of `text` that outlives the environment, or NULL if it is too long
 * (a path longer than PATH_MAX is of no use). */
static const char *keep_text(const char *text) {
  size_t len = strnlen(text, 4096) + 1;
  if (len > 4096 || len > sizeof(text_store) - text_used) return NULL;
  char *copy = text_store + text_used;
  memcpy(copy, text, len);
  text_used += len;
  return copy;
}
static bool preload_defaults;
static bool machine_default_set[HP_OPT_COUNT];
static long long machine_default[HP_OPT_COUNT];

void options_use_preload_defaults(void) { preload_defaults = true; }

void options_set_default(hp_option_id id, long long value) {
  machine_default[id] = value;
  machine_default_set[id] = true;
}

static long long default_of(hp_option_id id) {
  const hp_option_desc *d = option_desc(id);
  if (machine_default_set[id]) return machine_default[id];
  return preload_defaults ? d->preload_default : d->default_value;
}

static void parse_one(hp_option_id id) {
  const hp_option_desc *d = option_desc(id);
  hp_option_state *o = &options[id];
  o->value = default_of(id);
  o->source = HP_OPTION_DEFAULT;
  const char *text = getenv(d->name);
  if (!text) return;
  o->text = keep_text(text);
  if (!o->text && d->type == HP_TYPE_TEXT) {
    o->source = HP_OPTION_INVALID;
    hp_warn("%s is longer than %d bytes; ignored", d->name, 4095);
    return;
  }
  char expected[96];
  long long value = 0;
  if (option_parse(id, text, preload_defaults, &value, expected, sizeof(expected)) != 0) {
    char def[48];
    option_format(id, o->value, def, sizeof(def));
    o->source = HP_OPTION_INVALID;
    hp_warn("%s='%s' is not valid (expected %s); using the default %s", d->name, text, expected, def);
    return;
  }
  o->value = value;
  o->source = HP_OPTION_SET;
}

/* Is any HUGEPOOL_* variable in the environment? */
static bool any_hugepool_variable(void) {
  for (char **e = environ; e && *e; e++) {
    if (strncmp(*e, "HUGEPOOL_", 9) == 0) return true;
  }
  return false;
}

/* A HUGEPOOL_* name that is no option (HUGEPOOL_POLCY=thp) would be
 * silently ignored: one warning each, naming the option it resembles. */
static void warn_unknown_names(void) {
  for (char **e = environ; e && *e; e++) {
    if (strncmp(*e, "HUGEPOOL_", 9) != 0) continue;
    size_t len = strcspn(*e, "=");
    if (option_find(*e, len) != HP_OPT_COUNT || option_foreign(*e, len)) continue;
    hp_option_id near = option_closest(*e, len);
    if (near != HP_OPT_COUNT)
      hp_warn("%.*s is not a hugepool option (did you mean %s?); it is ignored", (int)len, *e, option_desc(near)->name);
    else
      hp_warn("%.*s is not a hugepool option; it is ignored", (int)len, *e);
  }
}

void options_init(void) {
  if (getauxval(AT_SECURE)) {
    for (size_t i = 0; i < HP_OPT_COUNT; i++) options[i].value = default_of((hp_option_id)i);
    hp_warn_enable(options[HP_OPT_WARN].value != 0);
    if (any_hugepool_variable()) {
      hp_warn("setuid/setgid program: every HUGEPOOL_* variable is ignored, the defaults apply");
    }
    return;
  }
  hp_warn_enable(default_of(HP_OPT_WARN) != 0); /* a bad HUGEPOOL_WARN is reported under the default */
  parse_one(HP_OPT_WARN);                        /* first: it decides whether the others may warn */
  hp_warn_enable(options[HP_OPT_WARN].value != 0);
  for (size_t i = 0; i < HP_OPT_COUNT; i++) {
    if (i != HP_OPT_WARN) parse_one((hp_option_id)i);
  }
  hp_trace_enable(options[HP_OPT_VERBOSE].value != 0);
  warn_unknown_names();
}

long long option_get(hp_option_id id) { return options[id].value; }

bool option_in_environment(hp_option_id id) {
  if (getauxval(AT_SECURE)) return false;
  const char *name = option_desc(id)->name;
  size_t len = strlen(name);
  for (char **e = environ; e && *e; e++) {
    if (strncmp(*e, name, len) == 0 && (*e)[len] == '=') return true;
  }
  return false;
}

const char *option_get_string(hp_option_id id) { return options[id].source == HP_OPTION_SET ? options[id].text : NULL; }

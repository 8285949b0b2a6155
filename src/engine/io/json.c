/*
 * json.c — a strict JSON parser (RFC 8259) for weight-file headers.
 *
 * The input is untrusted: every read is checked against the end of the
 * buffer, nesting is bounded (EM_JSON_MAX_DEPTH, so the recursion is too),
 * and allocations grow with what was actually parsed, never with a count
 * claimed by the input. Strings are copied with escapes decoded; other
 * bytes, UTF-8 included, pass through unchanged (control characters below
 * 0x20 are rejected, as the grammar demands). Numbers that are integral
 * and fit int64 are kept exactly; the rest are doubles.
 */
#include "io_internal.h"

#include <errno.h>
#include <stdlib.h>

typedef struct json_parser {
    const char *what;
    const char *text;
    size_t n, pos;
    size_t base; /* added to offsets in messages (the text's place in a file) */
} json_parser;

static em_status json_error(json_parser *p, const char *message) {
    return em__fail(EM_ERR_ARGUMENT, "%s: invalid JSON: %s at byte %zu",
                    p->what, message, p->base + p->pos);
}

static void skip_space(json_parser *p) {
    while (p->pos < p->n) {
        char ch = p->text[p->pos];
        if (ch != ' ' && ch != '\t' && ch != '\n' && ch != '\r')
            return;
        p->pos++;
    }
}

static bool literal(json_parser *p, const char *word) {
    size_t len = strlen(word);
    if (p->n - p->pos < len || memcmp(p->text + p->pos, word, len) != 0)
        return false;
    p->pos += len;
    return true;
}

static int hex_digit(char ch) {
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* Four hex digits after "\u". */
static bool read_hex4(json_parser *p, unsigned *out) {
    if (p->n - p->pos < 4)
        return false;
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        int d = hex_digit(p->text[p->pos + i]);
        if (d < 0)
            return false;
        v = v * 16 + (unsigned)d;
    }
    p->pos += 4;
    *out = v;
    return true;
}

static size_t put_utf8(char *dst, unsigned cp) {
    if (cp < 0x80) {
        dst[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        dst[0] = (char)(0xC0 | (cp >> 6));
        dst[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        dst[0] = (char)(0xE0 | (cp >> 12));
        dst[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        dst[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    dst[0] = (char)(0xF0 | (cp >> 18));
    dst[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    dst[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    dst[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* A string at p->pos (the opening quote). The decoded text is never longer
 * than its source (an escape of 2-12 source bytes gives 1-4 bytes), so one
 * allocation of the source length is enough. */
static em_status parse_string(json_parser *p, char **out, size_t *len_out) {
    p->pos++; /* the quote */
    size_t end = p->pos;
    while (end < p->n && p->text[end] != '"') {
        if (p->text[end] == '\\')
            end++;
        end++;
    }
    if (end >= p->n)
        return json_error(p, "unterminated string");
    char *s = malloc(end - p->pos + 1);
    if (!s)
        return em__fail(EM_ERR_OOM, "%s: out of memory reading JSON",
                        p->what);
    size_t len = 0;
    while (p->pos < end) {
        unsigned char ch = (unsigned char)p->text[p->pos];
        if (ch < 0x20) {
            free(s);
            return json_error(p, "control character in a string");
        }
        if (ch != '\\') {
            s[len++] = (char)ch;
            p->pos++;
            continue;
        }
        p->pos++;
        char esc = p->text[p->pos++];
        switch (esc) {
        case '"': s[len++] = '"'; break;
        case '\\': s[len++] = '\\'; break;
        case '/': s[len++] = '/'; break;
        case 'b': s[len++] = '\b'; break;
        case 'f': s[len++] = '\f'; break;
        case 'n': s[len++] = '\n'; break;
        case 'r': s[len++] = '\r'; break;
        case 't': s[len++] = '\t'; break;
        case 'u': {
            unsigned cp;
            if (p->pos > end || !read_hex4(p, &cp) || p->pos > end) {
                free(s);
                return json_error(p, "bad \\u escape");
            }
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                unsigned low;
                if (end - p->pos < 6 || p->text[p->pos] != '\\' ||
                    p->text[p->pos + 1] != 'u') {
                    free(s);
                    return json_error(p, "unpaired surrogate");
                }
                p->pos += 2;
                if (!read_hex4(p, &low) || low < 0xDC00 || low > 0xDFFF) {
                    free(s);
                    return json_error(p, "unpaired surrogate");
                }
                cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                free(s);
                return json_error(p, "unpaired surrogate");
            }
            len += put_utf8(s + len, cp);
            break;
        }
        default:
            free(s);
            p->pos--;
            return json_error(p, "bad escape");
        }
    }
    s[len] = '\0';
    p->pos = end + 1;
    *out = s;
    *len_out = len;
    return EM_OK;
}

static bool is_digit(char ch) { return ch >= '0' && ch <= '9'; }

/* The number grammar, checked by hand (strtod accepts more: hex, inf,
 * leading '+'), then converted from a bounded copy. */
static em_status parse_number(json_parser *p, em_json *v) {
    size_t start = p->pos;
    bool integral = true;
    if (p->pos < p->n && p->text[p->pos] == '-')
        p->pos++;
    if (p->pos >= p->n || !is_digit(p->text[p->pos]))
        return json_error(p, "bad number");
    if (p->text[p->pos] == '0')
        p->pos++;
    else
        while (p->pos < p->n && is_digit(p->text[p->pos]))
            p->pos++;
    if (p->pos < p->n && p->text[p->pos] == '.') {
        integral = false;
        p->pos++;
        if (p->pos >= p->n || !is_digit(p->text[p->pos]))
            return json_error(p, "bad number");
        while (p->pos < p->n && is_digit(p->text[p->pos]))
            p->pos++;
    }
    if (p->pos < p->n && (p->text[p->pos] == 'e' || p->text[p->pos] == 'E')) {
        integral = false;
        p->pos++;
        if (p->pos < p->n && (p->text[p->pos] == '+' || p->text[p->pos] == '-'))
            p->pos++;
        if (p->pos >= p->n || !is_digit(p->text[p->pos]))
            return json_error(p, "bad number");
        while (p->pos < p->n && is_digit(p->text[p->pos]))
            p->pos++;
    }
    char buf[400];
    size_t len = p->pos - start;
    if (len >= sizeof buf) {
        p->pos = start;
        return json_error(p, "number too long");
    }
    memcpy(buf, p->text + start, len);
    buf[len] = '\0';
    if (integral) {
        errno = 0;
        long long i = strtoll(buf, NULL, 10);
        if (errno == 0) {
            v->kind = EM_JSON_INT;
            v->integer = (int64_t)i;
            v->number = (double)i;
            return EM_OK;
        }
    }
    v->kind = EM_JSON_FLOAT;
    v->number = strtod(buf, NULL);
    return EM_OK;
}

static em_status parse_value(json_parser *p, em_json *v, int depth);

/* Append a zeroed slot to a container being parsed (doubling growth). */
static em_status grow(json_parser *p, em_json *v, size_t *cap, bool object) {
    if (v->len < *cap)
        return EM_OK;
    size_t ncap = *cap ? *cap * 2 : 4;
    em_json *items = realloc(v->items, ncap * sizeof *items);
    if (items)
        v->items = items;
    if (object && items) {
        char **keys = realloc(v->keys, ncap * sizeof *keys);
        if (keys)
            v->keys = keys;
        size_t *lens = keys ? realloc(v->key_lens, ncap * sizeof *lens) : NULL;
        if (lens)
            v->key_lens = lens;
        items = lens ? items : NULL;
    }
    if (!items)
        return em__fail(EM_ERR_OOM, "%s: out of memory reading JSON",
                        p->what);
    *cap = ncap;
    return EM_OK;
}

static em_status parse_container(json_parser *p, em_json *v, int depth,
                                 bool object) {
    if (depth >= EM_JSON_MAX_DEPTH)
        return json_error(p, "nested too deeply");
    char close = object ? '}' : ']';
    v->kind = object ? EM_JSON_OBJECT : EM_JSON_ARRAY;
    p->pos++;
    size_t cap = 0;
    skip_space(p);
    if (p->pos < p->n && p->text[p->pos] == close) {
        p->pos++;
        return EM_OK;
    }
    for (;;) {
        em_status st = grow(p, v, &cap, object);
        if (st != EM_OK)
            return st;
        em_json *item = &v->items[v->len];
        memset(item, 0, sizeof *item);
        if (object) {
            skip_space(p);
            if (p->pos >= p->n || p->text[p->pos] != '"')
                return json_error(p, "expected a string key");
            v->keys[v->len] = NULL;
            st = parse_string(p, &v->keys[v->len], &v->key_lens[v->len]);
            if (st != EM_OK)
                return st;
            v->len++; /* owned from here: freed with the container */
            skip_space(p);
            if (p->pos >= p->n || p->text[p->pos] != ':')
                return json_error(p, "expected ':'");
            p->pos++;
            st = parse_value(p, item, depth + 1);
        } else {
            v->len++;
            st = parse_value(p, item, depth + 1);
        }
        if (st != EM_OK)
            return st;
        skip_space(p);
        if (p->pos < p->n && p->text[p->pos] == ',') {
            p->pos++;
            continue;
        }
        if (p->pos < p->n && p->text[p->pos] == close) {
            p->pos++;
            return EM_OK;
        }
        return json_error(p, object ? "expected ',' or '}'"
                                    : "expected ',' or ']'");
    }
}

static em_status parse_value(json_parser *p, em_json *v, int depth) {
    skip_space(p);
    v->offset = p->pos;
    if (p->pos >= p->n)
        return json_error(p, "unexpected end");
    switch (p->text[p->pos]) {
    case '{':
        return parse_container(p, v, depth, true);
    case '[':
        return parse_container(p, v, depth, false);
    case '"':
        v->kind = EM_JSON_STRING;
        return parse_string(p, &v->string, &v->len);
    case 't':
    case 'f':
    case 'n':
        if (literal(p, "true")) {
            v->kind = EM_JSON_BOOL;
            v->boolean = true;
        } else if (literal(p, "false")) {
            v->kind = EM_JSON_BOOL;
        } else if (literal(p, "null")) {
            v->kind = EM_JSON_NULL;
        } else {
            return json_error(p, "unexpected character");
        }
        return EM_OK;
    default:
        return parse_number(p, v);
    }
}

void em__json_free(em_json *v) {
    if (!v)
        return;
    free(v->string);
    if (v->kind == EM_JSON_ARRAY || v->kind == EM_JSON_OBJECT) {
        for (size_t i = 0; i < v->len; i++) {
            if (v->keys)
                free(v->keys[i]);
            em__json_free(&v->items[i]);
        }
    }
    free(v->items);
    free(v->keys);
    free(v->key_lens);
    memset(v, 0, sizeof *v);
}

em_status em__json_parse(const char *what, const char *text, size_t n,
                         size_t base, em_json *out) {
    memset(out, 0, sizeof *out);
    json_parser p = {.what = what, .text = text, .n = n, .pos = 0, .base = base};
    em_status st = parse_value(&p, out, 0);
    if (st == EM_OK) {
        skip_space(&p);
        if (p.pos != n)
            st = json_error(&p, "trailing characters");
    }
    if (st != EM_OK)
        em__json_free(out);
    return st;
}

const em_json *em__json_get(const em_json *object, const char *key) {
    if (!object || object->kind != EM_JSON_OBJECT)
        return NULL;
    size_t len = strlen(key);
    for (size_t i = 0; i < object->len; i++)
        if (object->key_lens[i] == len && memcmp(object->keys[i], key, len) == 0)
            return &object->items[i];
    return NULL;
}

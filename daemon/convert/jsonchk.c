/*
 * The strict JSON checker (jsonchk.h): a state machine over bytes with a
 * stack of open containers, in the manner of JSON_checker. Each state
 * names what the next byte may be; a value's end returns to the state of
 * the container around it (after_value).
 */
#include "daemon/convert/jsonchk.h"

#include <errno.h>
#include <string.h>

enum {
    S_VALUE,        /* a value is due (top level, after ':' or '[' / ',') */
    S_ARRAY_FIRST,  /* after '[': a value or ']' */
    S_OBJ_FIRST,    /* after '{': a key or '}' */
    S_KEY,          /* after ',' in an object: a key */
    S_COLON,        /* after a key */
    S_AFTER,        /* after a value: ',' or the container's end */
    S_STR,          /* inside a string */
    S_ESC,          /* after a backslash */
    S_HEX,          /* inside \uXXXX */
    S_LOW_BS,       /* a high surrogate escape: '\' of its low one due */
    S_LOW_U,        /* ... its 'u' due */
    S_LIT,          /* inside true / false / null */
    S_MINUS,        /* after '-': a digit */
    S_ZERO,         /* a number's integer part "0" */
    S_INT,          /* in the integer part */
    S_DOT,          /* after '.': a digit */
    S_FRAC,         /* in the fraction */
    S_EXP,          /* after 'e': sign or digit */
    S_EXP_SIGN,     /* after the exponent's sign: a digit */
    S_EXP_DIG,      /* in the exponent */
    S_END,          /* the top-level value is over: whitespace only */
};

void gt__jchk_init(struct gt__jchk *j)
{
    memset(j, 0, sizeof(*j));
    j->st = S_VALUE;
}

static int is_ws(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static int is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

/* A value just ended (string, literal, number, container). */
static void after_value(struct gt__jchk *j, int is_key)
{
    if (is_key) {
        j->st = S_COLON;
    } else if (j->depth == 0) {
        j->st = S_END;
        j->done = 1;
    } else {
        j->st = S_AFTER;
    }
}

static int open_container(struct gt__jchk *j, unsigned char c)
{
    if (j->depth == GT__JCHK_DEPTH)
        return -EINVAL;
    j->stack[j->depth++] = c;
    j->st = c == '{' ? S_OBJ_FIRST : S_ARRAY_FIRST;
    return 0;
}

static int close_container(struct gt__jchk *j, unsigned char c)
{
    if (j->depth == 0 || j->stack[j->depth - 1] != (c == '}' ? '{' : '['))
        return -EINVAL;
    j->depth--;
    after_value(j, 0);
    return 0;
}

/* The first byte of a value. */
static int value_start(struct gt__jchk *j, unsigned char c)
{
    switch (c) {
    case '{': case '[': return open_container(j, c);
    case '"': j->st = S_STR; j->key = 0; return 0;
    case 't': j->lit = "rue"; j->st = S_LIT; return 0;
    case 'f': j->lit = "alse"; j->st = S_LIT; return 0;
    case 'n': j->lit = "ull"; j->st = S_LIT; return 0;
    case '-': j->st = S_MINUS; return 0;
    case '0': j->st = S_ZERO; return 0;
    default:
        if (c >= '1' && c <= '9') {
            j->st = S_INT;
            return 0;
        }
        return -EINVAL;
    }
}

/* The lead byte of a multi-byte UTF-8 character inside a string. */
static int utf8_lead(struct gt__jchk *j, unsigned char c)
{
    j->utf8_lo = 0x80;
    j->utf8_hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) {
        j->utf8_left = 1;
    } else if (c >= 0xe0 && c <= 0xef) {
        j->utf8_left = 2;
        if (c == 0xe0)
            j->utf8_lo = 0xa0; /* no overlong forms */
        else if (c == 0xed)
            j->utf8_hi = 0x9f; /* no UTF-16 surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
        j->utf8_left = 3;
        if (c == 0xf0)
            j->utf8_lo = 0x90;
        else if (c == 0xf4)
            j->utf8_hi = 0x8f; /* nothing above U+10FFFF */
    } else {
        return -EINVAL;
    }
    return 0;
}

/* A byte inside a string (S_STR, S_ESC, S_HEX, S_LOW_*). */
static int string_byte(struct gt__jchk *j, unsigned char c)
{
    if (j->utf8_left) {
        if (c < j->utf8_lo || c > j->utf8_hi)
            return -EINVAL;
        j->utf8_lo = 0x80;
        j->utf8_hi = 0xbf;
        j->utf8_left--;
        return 0;
    }
    switch (j->st) {
    case S_STR:
        if (j->high_surrogate)
            return -EINVAL; /* an escaped high surrogate stands alone */
        if (c == '"') {
            after_value(j, j->key);
            return 0;
        }
        if (c == '\\') {
            j->st = S_ESC;
            return 0;
        }
        if (c < 0x20)
            return -EINVAL;
        return c < 0x80 ? 0 : utf8_lead(j, c);
    case S_ESC:
        if (c == 'u') {
            j->st = S_HEX;
            j->hex_left = 4;
            j->hex = 0;
            return 0;
        }
        if (j->high_surrogate || !strchr("\"\\/bfnrt", c) || c == 0)
            return -EINVAL;
        j->st = S_STR;
        return 0;
    case S_LOW_BS:
        if (c != '\\')
            return -EINVAL;
        j->st = S_LOW_U;
        return 0;
    case S_LOW_U:
        if (c != 'u')
            return -EINVAL;
        j->st = S_HEX;
        j->hex_left = 4;
        j->hex = 0;
        return 0;
    default: /* S_HEX */
        if (is_digit(c))
            j->hex = (uint16_t)(j->hex * 16 + (c - '0'));
        else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
            j->hex = (uint16_t)(j->hex * 16 + ((c | 0x20) - 'a' + 10));
        else
            return -EINVAL;
        if (--j->hex_left)
            return 0;
        if (j->high_surrogate) {
            if (j->hex < 0xdc00 || j->hex > 0xdfff)
                return -EINVAL;
            j->high_surrogate = 0;
        } else if (j->hex >= 0xdc00 && j->hex <= 0xdfff) {
            return -EINVAL; /* a low surrogate without its high one */
        } else if (j->hex >= 0xd800 && j->hex <= 0xdbff) {
            j->high_surrogate = 1;
            j->st = S_LOW_BS;
            return 0;
        }
        j->st = S_STR;
        return 0;
    }
}

/*
 * A byte of a number (S_MINUS .. S_EXP_DIG). @return 0 when it belongs
 * to the number, 1 when the number ended before it (the byte is still to
 * be read), -EINVAL.
 */
static int number_byte(struct gt__jchk *j, unsigned char c)
{
    switch (j->st) {
    case S_MINUS:
        if (c == '0')
            j->st = S_ZERO;
        else if (c >= '1' && c <= '9')
            j->st = S_INT;
        else
            return -EINVAL;
        return 0;
    case S_ZERO:
    case S_INT:
        if (is_digit(c) && j->st == S_INT)
            return 0;
        if (c == '.') {
            j->st = S_DOT;
            return 0;
        }
        break;
    case S_DOT:
    case S_EXP_SIGN:
        if (!is_digit(c))
            return -EINVAL;
        j->st = j->st == S_DOT ? S_FRAC : S_EXP_DIG;
        return 0;
    case S_FRAC:
        if (is_digit(c))
            return 0;
        break;
    case S_EXP:
        if (c == '+' || c == '-') {
            j->st = S_EXP_SIGN;
            return 0;
        }
        if (!is_digit(c))
            return -EINVAL;
        j->st = S_EXP_DIG;
        return 0;
    default: /* S_EXP_DIG */
        return is_digit(c) ? 0 : (after_value(j, 0), 1);
    }
    if ((c | 0x20) == 'e') {
        j->st = S_EXP;
        return 0;
    }
    if (is_digit(c))
        return -EINVAL; /* a leading zero */
    after_value(j, 0);
    return 1;
}

/* A byte between values: structure and whitespace. */
static int struct_byte(struct gt__jchk *j, unsigned char c)
{
    if (is_ws(c))
        return 0;
    switch (j->st) {
    case S_VALUE:
        return value_start(j, c);
    case S_ARRAY_FIRST:
        return c == ']' ? close_container(j, c) : value_start(j, c);
    case S_OBJ_FIRST:
    case S_KEY:
        if (c == '}' && j->st == S_OBJ_FIRST)
            return close_container(j, c);
        if (c != '"')
            return -EINVAL;
        j->st = S_STR;
        j->key = 1;
        return 0;
    case S_COLON:
        if (c != ':')
            return -EINVAL;
        j->st = S_VALUE;
        return 0;
    case S_AFTER:
        if (c == '}' || c == ']')
            return close_container(j, c);
        if (c != ',')
            return -EINVAL;
        j->st = j->stack[j->depth - 1] == '{' ? S_KEY : S_VALUE;
        return 0;
    default: /* S_END */
        return -EINVAL;
    }
}

static int feed(struct gt__jchk *j, unsigned char c)
{
    int rc;

    if (j->st >= S_STR && j->st <= S_LOW_U)
        return string_byte(j, c);
    if (j->st == S_LIT) {
        if (c != (unsigned char)*j->lit)
            return -EINVAL;
        if (!*++j->lit)
            after_value(j, 0);
        return 0;
    }
    if (j->st >= S_MINUS && j->st <= S_EXP_DIG) {
        if ((rc = number_byte(j, c)) <= 0)
            return rc;
    }
    return struct_byte(j, c);
}

int gt__jchk_byte(struct gt__jchk *j, unsigned char c)
{
    if (j->bad || feed(j, c) < 0) {
        j->bad = 1;
        return -EINVAL;
    }
    return 0;
}

int gt__json_check(const char *s, size_t n)
{
    struct gt__jchk j;

    gt__jchk_init(&j);
    for (size_t i = 0; i < n; i++)
        if (gt__jchk_byte(&j, (unsigned char)s[i]) < 0)
            return 0;
    /* A top-level number ends only at what follows it. */
    if (j.st >= S_MINUS && j.st <= S_EXP_DIG && gt__jchk_byte(&j, ' ') < 0)
        return 0;
    return gt__jchk_whole(&j);
}

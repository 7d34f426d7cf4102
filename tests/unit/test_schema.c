/*
 * Keeps include/gradtrace/wire.h and schema/wire.md in step: every row of
 * the schema's record table must name a type the header defines, with the
 * same number, struct and size, and every type must have a row.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "common/codec.h"

struct row {
    int type;
    char name[64];
    char st[64];
    int size;
};

#define HEADER_ROW(t, s) {t, #t, #s, (int)sizeof(struct s)},
static const struct row header_rows[] = {GT_WIRE_RECORDS(HEADER_ROW)};
#undef HEADER_ROW

static int read_schema(struct row *rows, int max)
{
    FILE *f = fopen("schema/wire.md", "r");
    char line[1024];
    int n = 0;

    cr_assert_not_null(f, "run from the repository root: schema/wire.md");
    while (fgets(line, sizeof(line), f) && n < max) {
        struct row r;
        if (sscanf(line, "| %d | %63[A-Z_] | %63[a-z_] | %d", &r.type, r.name,
                   r.st, &r.size) == 4)
            rows[n++] = r;
    }
    fclose(f);
    return n;
}

Test(schema, record_table_matches_header)
{
    struct row rows[128];
    int n = read_schema(rows, 128);
    size_t nh = sizeof(header_rows) / sizeof(header_rows[0]);

    cr_assert_eq((size_t)n, nh, "schema lists %d records, wire.h %zu", n, nh);
    size_t ntypes = 0;
    for (uint16_t t = 1; t < GT_R_TYPE_COUNT; t++)
        ntypes += gt__rec_size(t) != 0; /* reserved numbers have no size */
    cr_assert_eq(nh, ntypes, "every type is in GT_WIRE_RECORDS");
    cr_assert_eq(header_rows[nh - 1].type, GT_R_TYPE_COUNT - 1,
                 "the last type is the last in GT_WIRE_RECORDS");
    for (size_t i = 0; i < nh; i++) {
        const struct row *h = &header_rows[i];
        int found = 0;
        for (int j = 0; j < n; j++) {
            if (rows[j].type != h->type)
                continue;
            found = 1;
            cr_assert_str_eq(h->name + 5, rows[j].name, "type %d name", h->type);
            cr_assert_str_eq(h->st, rows[j].st, "type %d struct", h->type);
            cr_assert_eq(h->size, rows[j].size, "type %d (%s) size", h->type,
                         rows[j].name);
            cr_assert_eq((size_t)h->size, gt__rec_size((uint16_t)h->type));
        }
        cr_assert(found, "%s has no row in schema/wire.md", h->name);
    }
}

Test(schema, fixed_headers_match_schema)
{
    cr_assert_eq(sizeof(struct gt_hello), 64);
    cr_assert_eq(sizeof(struct gt_chunk_header), 48);
    cr_assert_eq(sizeof(struct gt_ctl), 8);
    cr_assert_eq(GT_CHUNK_MAGIC, 0x4b435447u);
    cr_assert_eq(GT_CTL_MAGIC, 0x4c544347u);
    cr_assert_eq(memcmp("GTCK", &(uint32_t){GT_CHUNK_MAGIC}, 4), 0);
}

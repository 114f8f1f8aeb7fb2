/*
 * .npz archives: numpy's savez (members stored) and savez_compressed
 * (deflated), zip files of .npy members. A member is named by a path
 * "ARCHIVE.npz:NAME" wherever a .npy file is read. The zip's central
 * directory gives each member's place and sizes (zip64 ones too: numpy
 * writes every member with zip64 headers); zlib inflates it, and its CRC-32
 * is checked, so a damaged archive is refused rather than read wrong.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "io/io.h"

static uint32_t le16(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static uint32_t le32(const unsigned char *p) { return le16(p) | le16(p + 2) << 16; }
static uint64_t le64(const unsigned char *p) { return le32(p) | (uint64_t)le32(p + 4) << 32; }

int ag_i_npz_split(const char *path, char **archive, const char **member)
{
    const char *at = strstr(path, ".npz:");
    if (!at)
        return 0;
    *member = at + 5;
    *archive = strndup(path, (size_t)(at + 4 - path));
    return *archive ? 1 : -1;
}

/* The sizes and offset of a central directory entry, widened by its zip64
   extra field where they are 0xFFFFFFFF. */
typedef struct {
    uint64_t size, csize, offset;
    uint32_t method, crc;
} entry_t;

static int read_entry(entry_t *e, const unsigned char *c, const unsigned char *end)
{
    e->method = le16(c + 10);
    e->crc = le32(c + 16);
    e->csize = le32(c + 20), e->size = le32(c + 24), e->offset = le32(c + 42);
    const unsigned char *x = c + 46 + le16(c + 28), *x_end = x + le16(c + 30);
    if (x_end > end)
        return -1;
    while (x + 4 <= x_end) {
        const uint32_t id = le16(x), len = le16(x + 2);
        const unsigned char *v = x + 4;
        if (v + len > x_end)
            return -1;
        if (id == 1) {   /* zip64: the fields that overflowed, in this order */
            uint64_t *fields[] = {&e->size, &e->csize, &e->offset};
            for (int k = 0; k < 3; k++)
                if (*fields[k] == 0xFFFFFFFFu) {
                    if (v + 8 > x + 4 + len)
                        return -1;
                    *fields[k] = le64(v), v += 8;
                }
        }
        x += 4 + len;
    }
    return 0;
}

int ag_i_npz_member(unsigned char **data, size_t *len, const char *archive, const char *member,
                    ag_error_t *err)
{
    *data = NULL;
    *len = 0;
    char *zip;
    size_t n;
    int rc = ag_i_read_text(archive, &zip, &n, err);
    if (rc)
        return rc;
    const unsigned char *z = (const unsigned char *)zip;
    /* the end of central directory record: the last "PK\5\6", at most 64 KiB of
       comment after it */
    int64_t eocd = -1;
    for (int64_t at = (int64_t)n - 22; at >= 0 && at >= (int64_t)n - 22 - 65535; at--)
        if (le32(z + at) == 0x06054b50u) {
            eocd = at;
            break;
        }
    char want[512];
    snprintf(want, sizeof want, "%s%s", member,
             strlen(member) > 4 && strcmp(member + strlen(member) - 4, ".npy") == 0 ? "" : ".npy");
    uint64_t dir = 0, count = 0;
    if (eocd >= 0) {
        count = le16(z + eocd + 10), dir = le32(z + eocd + 16);
        /* zip64: its locator, 20 bytes before, points to the zip64 record */
        if ((count == 0xFFFF || dir == 0xFFFFFFFFu) && eocd >= 20 &&
            le32(z + eocd - 20) == 0x07064b50u) {
            const uint64_t rec = le64(z + eocd - 12);
            if (rec + 56 <= n && le32(z + rec) == 0x06064b50u)
                count = le64(z + rec + 32), dir = le64(z + rec + 48);
        }
    }
    if (eocd < 0 || dir > n) {
        free(zip);
        return ag_fail(err, AG_EFORMAT, "%s: not a .npz archive (no zip directory)", archive);
    }
    entry_t e;
    int found = 0;
    char names[256] = "";
    const unsigned char *c = z + dir, *end = z + n;
    for (uint64_t k = 0; k < count && !found; k++) {
        if (c + 46 > end || le32(c) != 0x02014b50u || c + 46 + le16(c + 28) > end) {
            free(zip);
            return ag_fail(err, AG_EFORMAT, "%s: a damaged zip directory (entry %llu)", archive,
                           (unsigned long long)k);
        }
        const size_t name_len = le16(c + 28);
        if (name_len == strlen(want) && memcmp(c + 46, want, name_len) == 0) {
            found = read_entry(&e, c, end) == 0 ? 1 : -1;
        } else if (strlen(names) + name_len + 3 < sizeof names) {   /* for the message */
            const size_t stem = name_len > 4 && memcmp(c + 46 + name_len - 4, ".npy", 4) == 0
                                    ? name_len - 4 : name_len;
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%.*s",
                     *names ? ", " : "", (int)stem, (const char *)(c + 46));
        }
        c += 46 + name_len + le16(c + 30) + le16(c + 32);
    }
    if (found <= 0) {
        free(zip);
        return found < 0 ? ag_fail(err, AG_EFORMAT, "%s: member %s has a damaged header",
                                   archive, want)
                         : ag_fail(err, AG_EINVAL, "%s has no member '%s'; it has %s", archive,
                                   member, *names ? names : "none");
    }
    const unsigned char *local = z + e.offset;
    if (e.offset + 30 > n || le32(local) != 0x04034b50u ||
        e.offset + 30 + le16(local + 26) + le16(local + 28) + e.csize > n) {
        free(zip);
        return ag_fail(err, AG_EFORMAT, "%s: member %s is truncated", archive, want);
    }
    const unsigned char *packed = local + 30 + le16(local + 26) + le16(local + 28);
    if (e.method != 0 && e.method != 8) {
        free(zip);
        return ag_fail(err, AG_EFORMAT, "%s: member %s is compressed by method %u; numpy's "
                       "savez and savez_compressed write 0 (stored) or 8 (deflate)", archive,
                       want, e.method);
    }
    unsigned char *out = ag_alloc((int64_t)e.size + 1, 1, err, archive);
    if (!out) {
        free(zip);
        return ag_alloc_status();
    }
    if (e.method == 0) {
        if (e.csize != e.size)
            rc = ag_fail(err, AG_EFORMAT, "%s: member %s is stored with two sizes", archive, want);
        else
            memcpy(out, packed, (size_t)e.size);
    } else {
        /* raw deflate in pieces: zlib counts in 32-bit unsigned ints */
        z_stream s;
        memset(&s, 0, sizeof s);
        int zr = inflateInit2(&s, -MAX_WBITS);
        uint64_t in_left = e.csize, out_left = e.size;
        s.next_in = (unsigned char *)packed, s.next_out = out;
        while (zr == Z_OK) {
            const uInt in_now = in_left > UINT32_MAX ? UINT32_MAX : (uInt)in_left;
            const uInt out_now = out_left > UINT32_MAX ? UINT32_MAX : (uInt)out_left;
            s.avail_in = in_now, s.avail_out = out_now;
            zr = inflate(&s, Z_NO_FLUSH);
            in_left -= in_now - s.avail_in, out_left -= out_now - s.avail_out;
            if (zr == Z_OK && in_now == s.avail_in && out_now == s.avail_out)
                zr = Z_DATA_ERROR;   /* no progress: the data ends early */
        }
        inflateEnd(&s);
        if (zr != Z_STREAM_END || out_left != 0)
            rc = ag_fail(err, AG_EFORMAT, "%s: member %s does not inflate to its %llu bytes "
                         "(%s)", archive, want, (unsigned long long)e.size,
                         s.msg ? s.msg : "it ends early");
    }
    if (!rc) {
        uLong crc = crc32(0L, Z_NULL, 0);
        for (uint64_t at = 0; at < e.size; at += 1u << 30)   /* uInt lengths */
            crc = crc32(crc, out + at, (uInt)(e.size - at < (1u << 30) ? e.size - at : 1u << 30));
        if ((uint32_t)crc != e.crc)
            rc = ag_fail(err, AG_EFORMAT, "%s: member %s fails its CRC-32 check (the archive "
                         "is damaged)", archive, want);
    }
    free(zip);
    if (rc) {
        free(out);
        return rc;
    }
    *data = out;
    *len = (size_t)e.size;
    return AG_OK;
}

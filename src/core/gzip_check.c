/* Integrity of gzip files before the readers read them (R/gsea-io.R:
 * read_lines()).  R's gzfile() connection returns whatever it could
 * inflate from a truncated file without a word, so a cut download would be
 * read as a shorter file.  Here zlib inflates the whole file once, member
 * after member (bgzip writes many), and checks that every member ends with
 * its trailer: CRC-32 and length as zlib verifies them. */
#define R_NO_REMAP
#include <stdio.h>
#include <string.h>
#include <zlib.h>
#include <R.h>
#include <Rinternals.h>

/* NULL when `path` is not gzip or is whole; else why it is not. */
static const char *gzip_problem(const char *path, char *msg, size_t len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL; /* the reader reports the unreadable file */
  unsigned char in[65536], out[65536];
  size_t n = fread(in, 1, 2, f);
  const char *why = NULL;
  if (n < 2 || in[0] != 0x1f || in[1] != 0x8b) { fclose(f); return NULL; }
  rewind(f);
  z_stream z;
  memset(&z, 0, sizeof z);
  if (inflateInit2(&z, 15 + 16) != Z_OK) { fclose(f); return NULL; }
  int in_member = 0, members = 0, rc = Z_OK;
  for (;;) {
    if (z.avail_in == 0) {
      z.avail_in = (uInt)fread(in, 1, sizeof in, f);
      z.next_in = in;
      if (z.avail_in == 0) break;
    }
    in_member = 1;
    z.next_out = out;
    z.avail_out = sizeof out;
    rc = inflate(&z, Z_NO_FLUSH);
    if (rc == Z_STREAM_END) {
      in_member = 0;
      members++;
      /* another member may follow (concatenated gzip, bgzip) */
      if (inflateReset(&z) != Z_OK) { why = "cannot restart the decompression"; break; }
      continue;
    }
    if (rc != Z_OK && rc != Z_BUF_ERROR) {
      /* bytes after a whole member that start no member (padding): gzip
       * ignores them with a warning, and so do we */
      if (members > 0 && z.total_out == 0 && rc == Z_DATA_ERROR) { in_member = 0; break; }
      snprintf(msg, len, "damaged gzip data (%s)", z.msg ? z.msg : "inflate failed");
      why = msg;
      break;
    }
  }
  if (!why && ferror(f)) why = "read error";
  if (!why && in_member) why = "truncated gzip file: the compressed data end before the last member's end";
  inflateEnd(&z);
  fclose(f);
  return why;
}

SEXP ffi_gzip_check(SEXP path) {
  if (!Rf_isString(path) || XLENGTH(path) != 1 || STRING_ELT(path, 0) == NA_STRING)
    Rf_error("`path` must be one file path");
  char msg[256];
  const char *why = gzip_problem(R_ExpandFileName(Rf_translateCharUTF8(STRING_ELT(path, 0))), msg, sizeof msg);
  return why ? Rf_mkString(why) : R_NilValue;
}

// A run's results as data: its settings and every table row, written as
// JSON (--json) or CSV (--csv) and read back from JSON (`gyre-bench plot`).
//
// JSON schema "gyre-bench/1" (docs/gyre-bench.md has the full description;
// a peer's driver may write the same shape, and only the fields marked * are
// required for `gyre-bench plot`):
//   {
//     "schema": "gyre-bench/1",
//     "settings": {
//       "library": "gyre", "version": "0.1.0",
//       "collective": "allreduce"*, "label": "",
//       "nranks": 2, "nhosts": 1,
//       "transport": "auto",       requested (--transport), or "auto"
//       "transports": "shm",       in use: "shm", "tcp", "shm+tcp"
//       "algorithm": "auto",       --algo, or "auto" (the tuner's choice)
//       "minBytes": 8, "maxBytes": 4096, "stepFactor": 2, "stepBytes": 0,
//       "iters": 20, "warmup": 5, "check": true,
//       "dtype": "float", "op": "sum",   as given: a name or "all"
//       "root": 0, "average": 1, "averageName": "avg",
//       "timeout": 0, "percentiles": false, "skew": 1
//     },
//     "rows"*: [ { "size"*: 8, "count": 2, "type": "float", "redop": "sum", "root": -1,
//                 "outOfPlace"*: { "time_us"*: 1.5, "algbw": 0.0053, "busbw"*: 0.0053,
//                                  "wrong": 0, "p50_us": null, "p99_us": null },
//                 "inPlace": { same } or null } ],
//     "outOfBounds": 0, "avgBusBw": 0.0053
//   }
// "wrong" is null when not checked (-c 0); p50_us/p99_us are null without
// --percentiles. Sizes in bytes, times in microseconds, bandwidths in GB/s.
//
// With --codec (a compressed call) the settings add "codec": "int8", each
// row "wireBytes" and "plainBytes" (bytes a rank sends per call, compressed
// and not), each cell "maxerr" and "rmserr" (relative errors; null when not
// checked), and "wrong" counts results that are not finite. Without it the
// document is exactly as above. seqtoheads and headstoseq add "seqLayout":
// "heads 32, kv heads 32, head dim 128, parts q".
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "bench/gyre_bench/json.h"

namespace gyre::bench {

struct RunSettings {
  std::string library = "gyre", version, collective, label;
  int nranks = 0, nhosts = 0;
  std::string transport = "auto", transports, algorithm = "auto";
  size_t minBytes = 0, maxBytes = 0, stepBytes = 0;
  double stepFactor = 0;
  int iters = 0, warmup = 0;
  bool check = true;
  std::string dtype, op;
  int root = 0, average = 1;
  std::string averageName = "avg";
  int timeout = 0;
  bool percentiles = false;
  int skew = 1;
  std::string codec = "none";  // --codec; "none": the plain calls
  std::string seqLayout;       // seqtoheads, headstoseq: the layout's flags; else empty
};

// One placement (out of place or in place) of one row.
struct Cell {
  bool present = false;  // false: the collective has no such form (N/A)
  double timeUs = 0, algbw = 0, busbw = 0;
  long long wrong = -1;             // -1: not checked
  double p50Us = -1, p99Us = -1;    // -1: not measured
  // --codec: the largest and the root-mean-square error, relative to the
  // largest exact value (test::ErrorStats); -1: not measured.
  double maxErr = -1, rmsErr = -1;
};

struct Row {
  size_t bytes = 0, count = 0;
  std::string type, redop;
  int root = -1;
  Cell outOfPlace, inPlace;
  double wireBytes = -1, plainBytes = -1;  // --codec: bytes a rank sends per call; -1: no codec
};

struct Report {
  RunSettings settings;
  std::vector<Row> rows;
  long long outOfBounds = 0;
  double avgBusBw = 0;
};

std::string toJson(const Report& r);
// Header line then one line per row; the settings are repeated on each row
// so the file stands alone in a spreadsheet. Empty cells for N/A.
std::string toCsv(const Report& r);
extern const char* const kCsvColumns;
// With --codec, appended to kCsvColumns.
extern const char* const kCsvCodecColumns;

// From JSON written by toJson (or a peer in the same schema). false and a
// reason when the document is not one.
bool fromJson(const std::string& text, Report& out, std::string& error);

// A number as JSON and CSV write it: enough digits to read back the same double
// printed at the table's precision (9 significant digits).
std::string formatNumber(double v);

}  // namespace gyre::bench

/* A trial record's reports taken apart into typed columns, in one pass in C.
 *
 * The same rule as planner/_store/schema.py's `_python_columns` (its Python twin, used where this module
 * was not built; tests/unit/test_columns.py holds the two to the same answer on generated reports):
 *
 *   take(reports, wanted) -> None when the reports are not regular, else
 *       (names, steps, times, last, values, numeric)
 *
 * Regular: every report is a dict with "step", "time_s" and "metrics"; every "metrics" a dict with the same
 * names; every step an int within +-2**53; every metric value a float, an int within +-2**53, None, or one
 * of "nan", "inf", "-inf". `names` is sorted; `steps` the bytes of int64 values, `times` of float64 values
 * (a number as it is; "nan", "inf", "-inf", "NaN", "Infinity", "-Infinity" as those; anything else NaN);
 * `last` the last report's values (the objects themselves); `values` maps each name of `wanted` (every name
 * when `wanted` is None) to the bytes of its float64 values (None and the non-finite texts as NaN and
 * infinities); `numeric` says that every metric value is a float or an int.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <float.h>
#include <string.h>

#define BIG 9007199254740992LL /* 2**53 */

static PyObject *k_step, *k_time, *k_metrics, *zero;

/* 1 when every key of the dict `d` is a str exactly. Looking into such a dict runs no Python code (a key's
 * hash and equality are str's own), so the values it lends stay alive while this module reads them: every
 * dict this module looks into is checked first (a dict parsed from JSON always passes). */
static int str_keys(PyObject *d)
{
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(d, &pos, &key, &value)) {
        if (!PyUnicode_CheckExact(key)) {
            return 0;
        }
    }
    return 1;
}

/* `wanted`: None or a set of str (exactly); else a TypeError. */
static int wanted_ok(PyObject *wanted)
{
    if (wanted == Py_None) {
        return 1;
    }
    if (PyAnySet_Check(wanted)) {
        PyObject *it = PyObject_GetIter(wanted), *key; /* a set's own iterator: no Python code runs */
        int str = it != NULL;
        while (str && (key = PyIter_Next(it)) != NULL) {
            str = PyUnicode_CheckExact(key);
            Py_DECREF(key);
        }
        Py_XDECREF(it);
        if (PyErr_Occurred()) {
            return 0;
        }
        if (str) {
            return 1;
        }
    }
    PyErr_SetString(PyExc_TypeError, "wanted: a set of metric names (str) or None");
    return 0;
}

/* A text a record uses for a non-finite number: 1 and *out set when it is one (`wide`: the spellings of
 * Python's json too), else 0. */
static int non_finite(PyObject *s, int wide, double *out)
{
    Py_ssize_t n;
    const char *text = PyUnicode_AsUTF8AndSize(s, &n);
    if (text == NULL) {
        PyErr_Clear();
        return 0;
    }
    if ((n == 3 && memcmp(text, "nan", 3) == 0) || (wide && n == 3 && memcmp(text, "NaN", 3) == 0)) {
        *out = Py_NAN;
        return 1;
    }
    if ((n == 3 && memcmp(text, "inf", 3) == 0) || (wide && n == 8 && memcmp(text, "Infinity", 8) == 0)) {
        *out = Py_HUGE_VAL;
        return 1;
    }
    if ((n == 4 && memcmp(text, "-inf", 4) == 0) || (wide && n == 9 && memcmp(text, "-Infinity", 9) == 0)) {
        *out = -Py_HUGE_VAL;
        return 1;
    }
    return 0;
}

/* An int as a double: an int too large for a double is an infinity of its sign. */
static double int_as_double(PyObject *v)
{
    double d = PyLong_AsDouble(v);
    if (d == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        d = PyObject_RichCompareBool(v, zero, Py_LT) == 1 ? -Py_HUGE_VAL : Py_HUGE_VAL;
        PyErr_Clear();
    }
    return d;
}

/* A metric value: 0 (numeric), 1 (allowed, not a number), -1 (not regular). */
static int metric_value(PyObject *v, double *out)
{
    if (PyFloat_CheckExact(v)) {
        *out = PyFloat_AS_DOUBLE(v);
        return 0;
    }
    if (PyLong_CheckExact(v)) {
        int overflow = 0;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow || x < -BIG || x > BIG) {
            return -1;
        }
        *out = (double)x;
        return 0;
    }
    if (v == Py_None) {
        *out = Py_NAN;
        return 1;
    }
    if (PyUnicode_CheckExact(v) && non_finite(v, 0, out)) {
        return 1;
    }
    return -1;
}

static double time_value(PyObject *v)
{
    double d;
    if (PyFloat_CheckExact(v)) {
        return PyFloat_AS_DOUBLE(v);
    }
    if (PyLong_CheckExact(v)) {
        return int_as_double(v);
    }
    if (PyUnicode_CheckExact(v) && non_finite(v, 1, &d)) {
        return d;
    }
    return Py_NAN;
}

static PyObject *take(PyObject *self, PyObject *args)
{
    PyObject *reports, *wanted;
    if (!PyArg_ParseTuple(args, "O!O", &PyList_Type, &reports, &wanted)) {
        return NULL;
    }
    if (!wanted_ok(wanted)) {
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(reports);
    PyObject *names = NULL, *steps = NULL, *times = NULL, *last = NULL, *values = NULL, *result = NULL;
    PyObject **columns = NULL; /* bytes of each wanted name's values, NULL for a name not wanted */
    PyObject *first_metrics = NULL;
    Py_ssize_t k = 0;
    int numeric = 1;

    if (n > 0) {
        PyObject *first = PyList_GET_ITEM(reports, 0);
        if (!PyDict_CheckExact(first) || !str_keys(first)) {
            Py_RETURN_NONE;
        }
        first_metrics = PyDict_GetItemWithError(first, k_metrics);
        if (first_metrics == NULL) {
            if (PyErr_Occurred()) {
                return NULL;
            }
            Py_RETURN_NONE;
        }
        if (!PyDict_CheckExact(first_metrics) || !str_keys(first_metrics)) {
            Py_RETURN_NONE;
        }
        names = PyDict_Keys(first_metrics);
    } else {
        names = PyList_New(0);
    }
    if (names == NULL || PyList_Sort(names) < 0) {
        goto error;
    }
    k = PyList_GET_SIZE(names);
    steps = PyBytes_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(long long));
    times = PyBytes_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(double));
    columns = PyMem_Calloc(k ? k : 1, sizeof(PyObject *));
    if (steps == NULL || times == NULL || columns == NULL) {
        goto error;
    }
    for (Py_ssize_t j = 0; j < k; j++) {
        int want = 1;
        if (wanted != Py_None) {
            want = PySet_Contains(wanted, PyList_GET_ITEM(names, j));
            if (want < 0) {
                goto error;
            }
        }
        if (want) {
            columns[j] = PyBytes_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(double));
            if (columns[j] == NULL) {
                goto error;
            }
        }
    }
    long long *step_out = (long long *)PyBytes_AS_STRING(steps);
    double *time_out = (double *)PyBytes_AS_STRING(times);
    PyObject *metrics = NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *report = PyList_GET_ITEM(reports, i);
        if (!PyDict_CheckExact(report) || !str_keys(report)) {
            goto irregular;
        }
        PyObject *step = PyDict_GetItemWithError(report, k_step);
        PyObject *time = step == NULL ? NULL : PyDict_GetItemWithError(report, k_time);
        metrics = time == NULL ? NULL : PyDict_GetItemWithError(report, k_metrics);
        if (metrics == NULL) {
            if (PyErr_Occurred()) {
                goto error;
            }
            goto irregular;
        }
        if (!PyLong_CheckExact(step) || !PyDict_CheckExact(metrics) || PyDict_GET_SIZE(metrics) != k
            || !str_keys(metrics)) {
            goto irregular;
        }
        int overflow = 0;
        long long s = PyLong_AsLongLongAndOverflow(step, &overflow);
        if (overflow || s < -BIG || s > BIG) {
            goto irregular;
        }
        step_out[i] = s;
        time_out[i] = time_value(time);
        for (Py_ssize_t j = 0; j < k; j++) {
            PyObject *value = PyDict_GetItemWithError(metrics, PyList_GET_ITEM(names, j));
            double d;
            if (value == NULL) {
                if (PyErr_Occurred()) {
                    goto error;
                }
                goto irregular; /* a name of the first report that this one lacks */
            }
            int kind = metric_value(value, &d);
            if (kind < 0) {
                goto irregular;
            }
            numeric &= kind == 0;
            if (columns[j] != NULL) {
                ((double *)PyBytes_AS_STRING(columns[j]))[i] = d;
            }
        }
    }
    last = PyList_New(k);
    values = PyDict_New();
    if (last == NULL || values == NULL) {
        goto error;
    }
    for (Py_ssize_t j = 0; j < k; j++) {
        PyObject *name = PyList_GET_ITEM(names, j);
        PyObject *value = PyDict_GetItemWithError(metrics, name); /* the last report's metrics */
        if (value == NULL) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_RuntimeError, "a metric of the last report went missing");
            }
            goto error;
        }
        Py_INCREF(value);
        PyList_SET_ITEM(last, j, value);
        if (columns[j] != NULL && PyDict_SetItem(values, name, columns[j]) < 0) {
            goto error;
        }
    }
    result = Py_BuildValue("(OOOOOO)", names, steps, times, last, values, numeric ? Py_True : Py_False);
    goto done;
irregular:
    result = Py_None;
    Py_INCREF(result);
    goto done;
error:
    result = NULL;
done:
    if (columns != NULL) {
        for (Py_ssize_t j = 0; j < k; j++) {
            Py_XDECREF(columns[j]);
        }
        PyMem_Free(columns);
    }
    Py_XDECREF(names);
    Py_XDECREF(steps);
    Py_XDECREF(times);
    Py_XDECREF(last);
    Py_XDECREF(values);
    return result;
}

/* ------------------------------------------------------------------ reports read from their text */
/*
 * scan(line, start, wanted): the reports array that starts at line[start] (its "["), read from the text as a
 * run writes it (json.dumps: {"step": 1, "metrics": {"acc": 0.5}, "time_s": 0.1}, ", " between reports),
 * without building a dict per report. None for anything else (other spacing, escapes in a name, a number
 * the fast reader does not take, metrics that differ between reports): the caller then parses the line
 * whole. Else (end, names, steps, times, last, values, numeric, first_time, last_time), as `take` gives
 * them (end: the offset just past the "]"; first_time and last_time: the first and last time_s as
 * orjson would give them).
 */

#define MAX_NAMES 64

typedef struct {
    const char *p, *end;
} Cursor;

static int literal(Cursor *c, const char *text, Py_ssize_t n)
{
    if (c->end - c->p < n || memcmp(c->p, text, n) != 0) {
        return 0;
    }
    c->p += n;
    return 1;
}

static const double POW10[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
                               1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* A JSON number at the cursor: 1 with *is_int (and *ival) or *dval set, 0 when it is not one this reader
 * takes (an int of 19 digits or more, a float that is not finite, a text longer than 63 characters). */
static int number(Cursor *c, int *is_int, long long *ival, double *dval)
{
    const char *start = c->p, *p = c->p, *end = c->end;
    if (p < end && *p == '-') {
        p++;
    }
    const char *digits = p;
    if (p < end && *p == '0') {
        p++;
    } else if (p < end && *p >= '1' && *p <= '9') {
        while (p < end && *p >= '0' && *p <= '9') {
            p++;
        }
    } else {
        return 0;
    }
    Py_ssize_t int_digits = p - digits;
    int fraction = 0, exponent = 0;
    const char *frac_start = NULL, *frac_end = NULL;
    if (p < end && *p == '.') {
        frac_start = ++p;
        while (p < end && *p >= '0' && *p <= '9') {
            p++;
        }
        if (p == frac_start) {
            return 0;
        }
        frac_end = p;
        fraction = 1;
    }
    long exp10 = 0;
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        int exp_negative = 0;
        if (p < end && (*p == '+' || *p == '-')) {
            exp_negative = *p == '-';
            p++;
        }
        const char *exp_start = p;
        while (p < end && *p >= '0' && *p <= '9') {
            if (p - exp_start < 6) {
                exp10 = exp10 * 10 + (*p - '0');
            }
            p++;
        }
        if (p == exp_start || p - exp_start >= 6) {
            return 0;
        }
        if (exp_negative) {
            exp10 = -exp10;
        }
        exponent = 1;
    }
    c->p = p;
    if (!fraction && !exponent) {
        if (int_digits > 18) {
            return 0; /* possibly past 64 bits: the general reader's (json's exact ints) */
        }
        long long x = 0;
        for (const char *d = digits; d < digits + int_digits; d++) {
            x = x * 10 + (*d - '0');
        }
        *is_int = 1;
        *ival = *start == '-' ? -x : x;
        return 1;
    }
    *is_int = 0;
    /* Clinger's fast path: a mantissa of at most 2**53 and a power of ten up to 1e22 are exact doubles, and
     * one multiplication or division of two exact doubles is correctly rounded. */
    unsigned long long m = 0;
    int significant = 0, ok = 1;
    for (const char *d = digits; d < digits + int_digits; d++) {
        if (m || *d != '0') {
            significant++;
        }
        m = m * 10 + (unsigned)(*d - '0');
        if (significant > 18) {
            ok = 0;
            break;
        }
    }
    if (ok && fraction) {
        for (const char *d = frac_start; d < frac_end; d++) {
            if (m || *d != '0') {
                significant++;
            }
            m = m * 10 + (unsigned)(*d - '0');
            exp10--;
            if (significant > 18) {
                ok = 0;
                break;
            }
        }
    }
    double value;
#if FLT_EVAL_METHOD != 0 /* x87 extended precision would round twice: the exact parser only */
    ok = 0;
#endif
    if (ok && m <= (1ULL << 53) && exp10 >= -22 && exp10 <= 22) {
        value = exp10 < 0 ? (double)m / POW10[-exp10] : (double)m * POW10[exp10];
        if (*start == '-') {
            value = -value;
        }
    } else {
        char text[64];
        Py_ssize_t n = p - start;
        if (n >= (Py_ssize_t)sizeof(text)) {
            return 0;
        }
        memcpy(text, start, n);
        text[n] = '\0';
        value = PyOS_string_to_double(text, NULL, NULL);
        if (value == -1.0 && PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
    }
    if (!isfinite(value)) {
        return 0; /* orjson refuses it; json reads it: the general reader decides */
    }
    *dval = value;
    return 1;
}

/* A name: a quoted run of printable ASCII with no quote or backslash (what json.dumps writes unescaped). */
static int name_at(Cursor *c, const char **text, Py_ssize_t *n)
{
    if (c->p >= c->end || *c->p != '"') {
        return 0;
    }
    const char *p = ++c->p;
    while (p < c->end && *p != '"') {
        if (*p < 0x20 || *p > 0x7e || *p == '\\') {
            return 0;
        }
        p++;
    }
    if (p >= c->end) {
        return 0;
    }
    *text = c->p;
    *n = p - c->p;
    c->p = p + 1;
    return 1;
}

enum { V_INT, V_FLOAT, V_NULL, V_NAN, V_INF, V_MINF };

typedef struct {
    int kind;
    long long ival;
    double dval;
} Value;

static const struct {
    const char *text;
    Py_ssize_t n;
    int kind;
} WORDS[] = {{"null", 4, V_NULL}, {"\"nan\"", 5, V_NAN}, {"\"inf\"", 5, V_INF}, {"\"-inf\"", 6, V_MINF}};

/* A metric value: a number, null, "nan", "inf" or "-inf". */
static int metric_at(Cursor *c, Value *v, double *d)
{
    for (size_t w = 0; w < sizeof(WORDS) / sizeof(WORDS[0]); w++) {
        if (literal(c, WORDS[w].text, WORDS[w].n)) {
            v->kind = WORDS[w].kind;
            *d = v->kind == V_INF ? Py_HUGE_VAL : v->kind == V_MINF ? -Py_HUGE_VAL : Py_NAN;
            return 1;
        }
    }
    int is_int;
    if (!number(c, &is_int, &v->ival, &v->dval)) {
        return 0;
    }
    if (is_int) {
        if (v->ival < -BIG || v->ival > BIG) {
            return 0;
        }
        v->kind = V_INT;
        *d = (double)v->ival;
    } else {
        v->kind = V_FLOAT;
        *d = v->dval;
    }
    return 1;
}

static PyObject *value_object(const Value *v)
{
    switch (v->kind) {
    case V_INT:
        return PyLong_FromLongLong(v->ival);
    case V_FLOAT:
        return PyFloat_FromDouble(v->dval);
    case V_NAN:
        return PyUnicode_FromString("nan");
    case V_INF:
        return PyUnicode_FromString("inf");
    case V_MINF:
        return PyUnicode_FromString("-inf");
    default:
        Py_RETURN_NONE;
    }
}

typedef struct {
    long long *steps;
    double *times, *values; /* values: report by report, k a report */
    Py_ssize_t n, cap;
} Rows;

static int grow(Rows *rows, Py_ssize_t k)
{
    Py_ssize_t cap = rows->cap ? rows->cap * 2 : 128;
    long long *steps = PyMem_Realloc(rows->steps, cap * sizeof(long long));
    if (steps == NULL) {
        return 0;
    }
    rows->steps = steps;
    double *times = PyMem_Realloc(rows->times, cap * sizeof(double));
    if (times == NULL) {
        return 0;
    }
    rows->times = times;
    double *values = PyMem_Realloc(rows->values, cap * (k ? k : 1) * sizeof(double));
    if (values == NULL) {
        return 0;
    }
    rows->values = values;
    rows->cap = cap;
    return 1;
}

static PyObject *scan(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t start;
    PyObject *wanted;
    if (!PyArg_ParseTuple(args, "y*nO", &view, &start, &wanted)) {
        return NULL;
    }
    if (!wanted_ok(wanted)) {
        PyBuffer_Release(&view);
        return NULL;
    }
    PyObject *result = NULL;
    Rows rows = {NULL, NULL, NULL, 0, 0};
    const char *names[MAX_NAMES];
    Py_ssize_t lens[MAX_NAMES];
    Value last[MAX_NAMES], first_time = {0}, last_time = {0};
    Py_ssize_t k = 0;
    int numeric = 1;
    if (start < 0 || start >= view.len) {
        goto irregular;
    }
    Cursor c = {(const char *)view.buf + start, (const char *)view.buf + view.len};
    if (!literal(&c, "[", 1)) {
        goto irregular;
    }
    for (;;) {
        if (rows.n == rows.cap && !grow(&rows, rows.n ? k : MAX_NAMES)) {
            PyErr_NoMemory();
            goto error;
        }
        int is_int;
        long long step;
        double ignored;
        if (!literal(&c, "{\"step\": ", 9) || !number(&c, &is_int, &step, &ignored) || !is_int
            || step < -BIG || step > BIG || !literal(&c, ", \"metrics\": {", 14)) {
            goto irregular;
        }
        rows.steps[rows.n] = step;
        Py_ssize_t j = 0;
        for (;; j++) {
            const char *text;
            Py_ssize_t n;
            if (j >= MAX_NAMES || !name_at(&c, &text, &n) || !literal(&c, ": ", 2)) {
                goto irregular;
            }
            if (rows.n == 0) {
                for (Py_ssize_t i = 0; i < j; i++) {
                    if (lens[i] == n && memcmp(names[i], text, n) == 0) {
                        goto irregular; /* a name twice in one report: the general reader's */
                    }
                }
                names[j] = text;
                lens[j] = n;
            } else if (j >= k || lens[j] != n || memcmp(names[j], text, n) != 0) {
                goto irregular;
            }
            double d;
            if (!metric_at(&c, &last[j], &d)) {
                goto irregular;
            }
            numeric &= last[j].kind == V_INT || last[j].kind == V_FLOAT;
            rows.values[rows.n * k + j] = d; /* row 0: k is not known yet, but row 0 starts at 0 */
            if (literal(&c, "}", 1)) {
                break;
            }
            if (!literal(&c, ", ", 2)) {
                goto irregular;
            }
        }
        if (rows.n == 0) {
            k = j + 1;
        } else if (j + 1 != k) {
            goto irregular;
        }
        Value time;
        if (!literal(&c, ", \"time_s\": ", 12) || !number(&c, &is_int, &time.ival, &time.dval)) {
            goto irregular;
        }
        time.kind = is_int ? V_INT : V_FLOAT;
        rows.times[rows.n] = is_int ? (double)time.ival : time.dval;
        if (rows.n == 0) {
            first_time = time;
        }
        last_time = time;
        rows.n++;
        if (!literal(&c, "}", 1)) {
            goto irregular;
        }
        if (literal(&c, "]", 1)) {
            break;
        }
        if (!literal(&c, ", ", 2)) {
            goto irregular;
        }
    }
    /* sorted names, as `take` gives them */
    PyObject *unsorted = PyList_New(k);
    if (unsorted == NULL) {
        goto error;
    }
    for (Py_ssize_t j = 0; j < k; j++) {
        PyObject *name = PyUnicode_DecodeASCII(names[j], lens[j], NULL);
        if (name == NULL) {
            Py_DECREF(unsorted);
            goto error;
        }
        PyList_SET_ITEM(unsorted, j, name);
    }
    PyObject *sorted_names = PyList_GetSlice(unsorted, 0, k);
    if (sorted_names == NULL || PyList_Sort(sorted_names) < 0) {
        Py_DECREF(unsorted);
        Py_XDECREF(sorted_names);
        goto error;
    }
    PyObject *last_list = PyList_New(k), *values = PyDict_New();
    PyObject *steps = PyBytes_FromStringAndSize((const char *)rows.steps, rows.n * (Py_ssize_t)sizeof(long long));
    PyObject *times = PyBytes_FromStringAndSize((const char *)rows.times, rows.n * (Py_ssize_t)sizeof(double));
    int failed = last_list == NULL || values == NULL || steps == NULL || times == NULL;
    for (Py_ssize_t s = 0; !failed && s < k; s++) {
        PyObject *name = PyList_GET_ITEM(sorted_names, s);
        Py_ssize_t j = 0;
        while (PyUnicode_Compare(PyList_GET_ITEM(unsorted, j), name) != 0) {
            j++;
        }
        PyObject *value = value_object(&last[j]);
        if (value == NULL) {
            failed = 1;
            break;
        }
        PyList_SET_ITEM(last_list, s, value);
        int want = wanted == Py_None ? 1 : PySet_Contains(wanted, name);
        if (want < 0) {
            failed = 1;
            break;
        }
        if (want) {
            PyObject *column = PyBytes_FromStringAndSize(NULL, rows.n * (Py_ssize_t)sizeof(double));
            if (column == NULL) {
                failed = 1;
                break;
            }
            double *out = (double *)PyBytes_AS_STRING(column);
            for (Py_ssize_t i = 0; i < rows.n; i++) {
                out[i] = rows.values[i * k + j]; /* row 0 was stored before k was known, at 0 all the same */
            }
            failed = PyDict_SetItem(values, name, column) < 0;
            Py_DECREF(column);
        }
    }
    PyObject *first_obj = failed ? NULL : value_object(&first_time);
    PyObject *last_obj = failed ? NULL : value_object(&last_time);
    if (!failed && first_obj != NULL && last_obj != NULL) {
        result = Py_BuildValue("(nOOOOOOOO)", (Py_ssize_t)(c.p - (const char *)view.buf), sorted_names, steps, times,
                               last_list, values, numeric ? Py_True : Py_False, first_obj, last_obj);
    }
    Py_XDECREF(first_obj);
    Py_XDECREF(last_obj);
    Py_XDECREF(unsorted);
    Py_XDECREF(sorted_names);
    Py_XDECREF(last_list);
    Py_XDECREF(values);
    Py_XDECREF(steps);
    Py_XDECREF(times);
    goto done;
irregular:
    result = Py_None;
    Py_INCREF(result);
    goto done;
error:
    result = NULL;
done:
    PyMem_Free(rows.steps);
    PyMem_Free(rows.times);
    PyMem_Free(rows.values);
    PyBuffer_Release(&view);
    return result;
}

/* ------------------------------------------------------------------ the depth rule (bounds._fits) */

#define MAX_DEPTH 64

/* 1 when no non-empty list or dict inside `node` (`depth` levels down) lies MAX_DEPTH levels down, 0 when
 * one does, -1 when a value is not of a JSON type exactly (a subclass: the Python twin decides). With
 * `skip`, the key "reports" of `node` itself is left out. */
static int fits_at(PyObject *node, int depth, int skip);

/* fits_at's answer for one child of a node `depth` levels down. */
static int child_fits(PyObject *child, int depth)
{
    if ((PyDict_CheckExact(child) && PyDict_GET_SIZE(child)) || (PyList_CheckExact(child) && PyList_GET_SIZE(child))) {
        return depth + 1 >= MAX_DEPTH ? 0 : fits_at(child, depth + 1, 0);
    }
    if ((PyDict_Check(child) && !PyDict_CheckExact(child)) || (PyList_Check(child) && !PyList_CheckExact(child))) {
        return -1;
    }
    return 1;
}

static int fits_at(PyObject *node, int depth, int skip)
{
    PyObject *child, *key;
    int ok = 1;
    if (PyDict_CheckExact(node)) {
        Py_ssize_t pos = 0;
        while (ok == 1 && PyDict_Next(node, &pos, &key, &child)) {
            if (skip && PyUnicode_Check(key) && !PyUnicode_CheckExact(key)) {
                return -1; /* a str of another type may equal "reports": the Python twin decides */
            }
            if (!(skip && PyUnicode_CheckExact(key) && PyUnicode_CompareWithASCIIString(key, "reports") == 0)) {
                ok = child_fits(child, depth);
            }
        }
        return ok;
    }
    if (PyList_CheckExact(node)) {
        for (Py_ssize_t i = 0; ok == 1 && i < PyList_GET_SIZE(node); i++) {
            ok = child_fits(PyList_GET_ITEM(node, i), depth);
        }
        return ok;
    }
    return PyDict_Check(node) || PyList_Check(node) ? -1 : 1;
}

static PyObject *fits(PyObject *self, PyObject *args)
{
    PyObject *node;
    int skip;
    if (!PyArg_ParseTuple(args, "Op", &node, &skip)) {
        return NULL;
    }
    int ok = fits_at(node, 0, skip);
    if (ok < 0) {
        Py_RETURN_NONE;
    }
    return PyBool_FromLong(ok);
}

/* ------------------------------------------------------------------ a trial record's fields (schema._trial) */

/* The value of `key` in `d` (a dict that passed lookable: no Python code runs), NULL when absent. Borrowed. */
static PyObject *field(PyObject *d, const char *key)
{
    return PyDict_GetItemString(d, key);
}

static int text_or_none(PyObject *v)
{
    return v == NULL || v == Py_None || PyUnicode_CheckExact(v);
}

/* None, or an int (not a bool) from `lo` to 2**53. */
static int whole_or_none(PyObject *v, long long lo)
{
    if (v == NULL || v == Py_None) {
        return 1;
    }
    if (!PyLong_CheckExact(v)) {
        return 0;
    }
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow) {
        return 0;
    }
    return lo <= x && x <= BIG;
}

/* None, or a finite number (int or float, not a bool) of size at most 2**53. */
static int finite_or_none(PyObject *v)
{
    if (v == NULL || v == Py_None) {
        return 1;
    }
    if (PyFloat_CheckExact(v)) {
        double d = PyFloat_AS_DOUBLE(v);
        return isfinite(d) && fabs(d) <= (double)BIG;
    }
    return whole_or_none(v, -BIG);
}

/* A dict this module may look into: a dict exactly, every key a str exactly (see str_keys). */
static int lookable(PyObject *d)
{
    return PyDict_CheckExact(d) && str_keys(d);
}

static int dict_or_none(PyObject *v)
{
    return v == NULL || v == Py_None || lookable(v);
}

static int list_or_none(PyObject *v)
{
    return v == NULL || v == Py_None || PyList_CheckExact(v);
}

/* None, or a dict (see lookable) whose every value passes `ok`. */
static int each_value(PyObject *d, int (*ok)(PyObject *))
{
    if (!dict_or_none(d)) {
        return 0;
    }
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (d != NULL && d != Py_None && PyDict_Next(d, &pos, &key, &value)) {
        if (!ok(value)) {
            return 0;
        }
    }
    return 1;
}

static int count_ok(PyObject *n)
{
    return whole_or_none(n, 0);
}

/* A group's summary: None or {distinct, fingerprint}. */
static int group_ok(PyObject *summary)
{
    return dict_or_none(summary) && (summary == Py_None || (whole_or_none(field(summary, "distinct"), 0)
                                                           && text_or_none(field(summary, "fingerprint"))));
}

/* An overlap with another split: None or {key: count}. */
static int overlap_ok(PyObject *counts)
{
    return each_value(counts, count_ok);
}

/* One split: None or {presentations, distinct, fingerprint, groups, overlap}. */
static int split_ok(PyObject *split)
{
    return dict_or_none(split) && (split == Py_None || (
        whole_or_none(field(split, "presentations"), 0) && whole_or_none(field(split, "distinct"), 0)
        && text_or_none(field(split, "fingerprint")) && each_value(field(split, "groups"), group_ok)
        && each_value(field(split, "overlap"), overlap_ok)));
}

/* `splits`: per split name, {presentations, distinct, fingerprint, groups, overlap} (schema._splits). */
static int splits_ok(PyObject *splits)
{
    return each_value(splits, split_ok);
}

static const char *TEXTS[] = {"trial_id", "phase", "arm", "status", "started", "ended", "host", "contract_sha256", NULL};

/* True when every field of a trial record that `schema._trial` checks, but its reports, is as it wants
 * (False: the Python twin then checks the record and names what is wrong; it may also find it right). */
static PyObject *trial_ok(PyObject *self, PyObject *record)
{
    if (!lookable(record) || field(record, "trial_id") == NULL || field(record, "status") == NULL) {
        Py_RETURN_FALSE;
    }
    for (const char **name = TEXTS; *name != NULL; name++) {
        if (!text_or_none(field(record, *name))) {
            Py_RETURN_FALSE;
        }
    }
    if (!whole_or_none(field(record, "seed"), -BIG) || !whole_or_none(field(record, "index"), -BIG)
        || !whole_or_none(field(record, "attempts"), 0) || !whole_or_none(field(record, "pid"), 0)
        || !finite_or_none(field(record, "exposure")) || !finite_or_none(field(record, "duration_s"))
        || !dict_or_none(field(record, "params")) || !dict_or_none(field(record, "config"))
        || !list_or_none(field(record, "reports"))) {
        Py_RETURN_FALSE;
    }
    PyObject *errors = field(record, "errors");
    if (!list_or_none(errors)) {
        Py_RETURN_FALSE;
    }
    for (Py_ssize_t i = 0; errors != NULL && errors != Py_None && i < PyList_GET_SIZE(errors); i++) {
        PyObject *error = PyList_GET_ITEM(errors, i);
        if (!lookable(error) || !text_or_none(field(error, "type")) || !text_or_none(field(error, "message"))
            || !text_or_none(field(error, "traceback")) || !text_or_none(field(error, "status"))) {
            Py_RETURN_FALSE;
        }
    }
    PyObject *violations = field(record, "violations");
    if (!list_or_none(violations)) {
        Py_RETURN_FALSE;
    }
    for (Py_ssize_t i = 0; violations != NULL && violations != Py_None && i < PyList_GET_SIZE(violations); i++) {
        PyObject *violation = PyList_GET_ITEM(violations, i);
        if (PyUnicode_CheckExact(violation)) {
            continue;
        }
        if (!lookable(violation) || !text_or_none(field(violation, "kind"))
            || !finite_or_none(field(violation, "step"))) {
            Py_RETURN_FALSE;
        }
    }
    if (!splits_ok(field(record, "splits"))) {
        Py_RETURN_FALSE;
    }
    Py_RETURN_TRUE;
}

/* ------------------------------------------------------------------ bounds.long_digits */

/* True when `data` holds a run of 19 digits or more (an integer that may be past 64 bits). */
static PyObject *long_digits(PyObject *self, PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    const unsigned char *p = view.buf;
    Py_ssize_t run = 0, found = 0;
    for (Py_ssize_t i = 0; i < view.len; i++) {
        if (p[i] >= '0' && p[i] <= '9') {
            if (++run >= 19) {
                found = 1;
                break;
            }
        } else {
            run = 0;
        }
    }
    PyBuffer_Release(&view);
    return PyBool_FromLong(found);
}

static PyMethodDef methods[] = {
    {"take", take, METH_VARARGS, "A trial's reports as checked typed columns, or None when they are not regular."},
    {"scan", scan, METH_VARARGS, "A reports array read from the text a run writes, or None (then parse the line)."},
    {"fits", fits, METH_VARARGS, "The depth rule of planner._store.bounds._fits (None: a value of no exact JSON type)."},
    {"long_digits", long_digits, METH_O, "True when the bytes hold a run of 19 digits or more (bounds.long_digits)."},
    {"trial_ok", trial_ok, METH_O, "True when a trial record's fields but its reports pass schema._trial's checks."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_columns", NULL, -1, methods};

PyMODINIT_FUNC PyInit__columns(void)
{
    k_step = PyUnicode_InternFromString("step");
    k_time = PyUnicode_InternFromString("time_s");
    k_metrics = PyUnicode_InternFromString("metrics");
    zero = PyLong_FromLong(0);
    if (k_step == NULL || k_time == NULL || k_metrics == NULL || zero == NULL) {
        return NULL;
    }
    return PyModule_Create(&module);
}

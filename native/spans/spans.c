/* core.sentences.split_spans in C (issue 30): the same rules, the same spans.

   core/sentences.py is the definition: its regular expressions and string methods are
   mirrored here step by step, with CPython's own character tests (Py_UNICODE_ISSPACE is
   what `\s` and str.isspace() use, Py_UNICODE_ISALPHA str.isalpha(), ...), so that the two
   agree on every text. tests/core/test_sentences_native.py compares them on the seeds'
   abstracts and on random texts made of the characters the rules look at.

   The word lists (abbreviations, the small words that introduce a name) are not copied:
   core.sentences passes its own sets once, through configure(). */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#define LOOKBACK 64
#define MAX_WORDS 256
#define MAX_WORD 32

typedef struct {
    int n;
    char words[MAX_WORDS][MAX_WORD + 1];
    Py_ssize_t lengths[MAX_WORDS];
} word_list;

static word_list abbreviations, introducers;
static int configured = 0;

typedef struct {
    int kind;
    const void *data;
    Py_ssize_t length;
} text_t;

#define CH(t, i) PyUnicode_READ((t)->kind, (t)->data, (i))

static int is_ascii_letter(Py_UCS4 c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }

/* [^\W\d_]: a word character (str.isalnum() or "_") that is neither a decimal digit nor "_" */
static int is_name_letter(Py_UCS4 c) { return c != '_' && Py_UNICODE_ISALNUM(c) && !Py_UNICODE_ISDECIMAL(c); }

/* \w */
static int is_word_char(Py_UCS4 c) { return c == '_' || Py_UNICODE_ISALNUM(c); }

/* text[start:end] (ASCII), lower-cased, one of `list`'s words */
static int in_list(const text_t *t, Py_ssize_t start, Py_ssize_t end, const word_list *list, int lower)
{
    Py_ssize_t n = end - start;
    if (n <= 0 || n > MAX_WORD)
        return 0;
    for (int w = 0; w < list->n; w++) {
        if (list->lengths[w] != n)
            continue;
        Py_ssize_t i = 0;
        for (; i < n; i++) {
            Py_UCS4 c = CH(t, start + i);
            if (c > 127)
                break;
            if (lower && c >= 'A' && c <= 'Z')
                c += 'a' - 'A';
            if ((char)c != list->words[w][i])
                break;
        }
        if (i == n)
            return 1;
    }
    return 0;
}

/* str.islower() of text[start:end] */
static int is_lower(const text_t *t, Py_ssize_t start, Py_ssize_t end)
{
    if (end - start == 1)
        return Py_UNICODE_ISLOWER(CH(t, start));
    int cased = 0;
    for (Py_ssize_t i = start; i < end; i++) {
        Py_UCS4 c = CH(t, i);
        if (Py_UNICODE_ISUPPER(c) || Py_UNICODE_ISTITLE(c))
            return 0;
        if (!cased && Py_UNICODE_ISLOWER(c))
            cased = 1;
    }
    return cased;
}

/* _WORD_BEFORE_INITIAL.search(text, pos, endpos), `(?<![\w.])([^\W\d_]+)[ \t]+$`: the
   word's bounds in *word_start, *word_end, or 0 when there is no match. `$` matches at
   endpos, or before a newline that is the last character before endpos. */
static int word_before_initial(const text_t *t, Py_ssize_t pos, Py_ssize_t endpos, Py_ssize_t *word_start,
                               Py_ssize_t *word_end)
{
    Py_ssize_t end = endpos;
    if (end > pos && CH(t, end - 1) == '\n')
        end -= 1;
    Py_ssize_t w = end;
    while (w > pos && (CH(t, w - 1) == ' ' || CH(t, w - 1) == '\t'))
        w--;
    if (w == end)
        return 0;
    Py_ssize_t l = w;
    while (l > pos && is_name_letter(CH(t, l - 1)))
        l--;
    if (l == w)
        return 0;
    if (l > 0) {
        Py_UCS4 before = CH(t, l - 1);
        if (is_word_char(before) || before == '.')
            return 0;
    }
    *word_start = l;
    *word_end = w;
    return 1;
}

/* _is_abbreviation(text, stop) */
static int is_abbreviation(const text_t *t, Py_ssize_t stop)
{
    if (CH(t, stop) != '.')
        return 0;
    if (stop == 0 || !Py_UNICODE_ISALPHA(CH(t, stop - 1)))
        return 0;
    Py_ssize_t lower = stop - LOOKBACK > 0 ? stop - LOOKBACK : 0;
    /* begin = text.rfind(" ", lower, stop) + 1 */
    Py_ssize_t begin = 0;
    for (Py_ssize_t i = stop - 1; i >= lower; i--) {
        if (CH(t, i) == ' ') {
            begin = i + 1;
            break;
        }
    }
    /* word = text[begin:stop] if begin or not lower else "": all ASCII letters? */
    int plain = 0;
    if (begin || !lower) {
        plain = stop > begin;
        for (Py_ssize_t i = begin; plain && i < stop; i++)
            plain = is_ascii_letter(CH(t, i));
    }
    Py_ssize_t start, word_end = stop;
    if (plain) {
        start = begin;
        if (stop - begin > 1)
            return in_list(t, begin, stop, &abbreviations, 1);
    } else {
        /* _WORD_BEFORE.search(text, max(lower, begin), stop):
           `(?<![A-Za-z])([A-Za-z][A-Za-z.]*)\Z`, the look-behind seeing before the window */
        Py_ssize_t window = lower > begin ? lower : begin;
        Py_ssize_t r = stop;
        while (r > window && (is_ascii_letter(CH(t, r - 1)) || CH(t, r - 1) == '.'))
            r--;
        Py_ssize_t m = r;
        for (; m < stop; m++) {
            if (is_ascii_letter(CH(t, m)) && (m == 0 || !is_ascii_letter(CH(t, m - 1))))
                break;
        }
        if (m >= stop)
            return 0;
        /* the word ends with a letter (text[stop - 1]), so rstrip(".") leaves it as it is */
        if (in_list(t, m, stop, &abbreviations, 1))
            return 1;
        start = m;
    }
    if (word_end - start != 1 || !(CH(t, start) >= 'A' && CH(t, start) <= 'Z'))
        return 0;
    Py_ssize_t from = start - LOOKBACK > 0 ? start - LOOKBACK : 0, ws, we;
    if (!word_before_initial(t, from, start, &ws, &we))
        return 1;
    return !is_lower(t, ws, we) || in_list(t, ws, we, &introducers, 0);
}

/* _next_starts_sentence(text, pos) */
static int next_starts_sentence(const text_t *t, Py_ssize_t pos)
{
    Py_UCS4 first;
    if (pos + 1 < t->length && !Py_UNICODE_ISSPACE(CH(t, pos + 1))) {
        first = CH(t, pos + 1);
    } else {
        Py_ssize_t i = pos;
        while (i < t->length && Py_UNICODE_ISSPACE(CH(t, i)))
            i++;
        if (i >= t->length)
            return 1;
        first = CH(t, i);
    }
    return Py_UNICODE_ISUPPER(first) || Py_UNICODE_ISDIGIT(first) || first == '"' || first == '\'' || first == '(' ||
           first == '[' || first == 0x201C || first == 0x2018;
}

static int is_stop(Py_UCS4 c) { return c == '.' || c == '!' || c == '?'; }
static int is_closer(Py_UCS4 c) { return c == '"' || c == '\'' || c == ')' || c == ']'; }

/* One _BOUNDARY match at p (text[p] is a stop) inside [p, end):
   `[.!?]+["')\]]*(?:\s*(?:\[[^\[\]\s]{1,40}\])+)?(?=\s)`. Returns the match's end, or -1;
   *cited is whether the citations' group matched (the only way the match holds a "["). */
static Py_ssize_t boundary_at(const text_t *t, Py_ssize_t p, Py_ssize_t end, int *cited)
{
    Py_ssize_t j = p;
    while (j < end && is_stop(CH(t, j)))
        j++;
    while (j < end && is_closer(CH(t, j)))
        j++;
    Py_ssize_t c = j;
    while (c < end && Py_UNICODE_ISSPACE(CH(t, c)))
        c++;
    int citations = 0;
    while (c < end && CH(t, c) == '[') {
        Py_ssize_t q = c + 1;
        while (q < end) {
            Py_UCS4 x = CH(t, q);
            if (x == '[' || x == ']' || Py_UNICODE_ISSPACE(x))
                break;
            q++;
        }
        Py_ssize_t inner = q - (c + 1);
        if (inner < 1 || inner > 40 || q >= end || CH(t, q) != ']')
            break;
        c = q + 1;
        citations++;
    }
    if (citations && c < end && Py_UNICODE_ISSPACE(CH(t, c))) {
        *cited = 1;
        return c;
    }
    if (j < end && Py_UNICODE_ISSPACE(CH(t, j))) {
        *cited = 0;
        return j;
    }
    return -1;
}

static int append_span(PyObject *list, const text_t *t, Py_ssize_t start, Py_ssize_t end)
{
    while (start < end && Py_UNICODE_ISSPACE(CH(t, start)))
        start++;
    while (end > start && Py_UNICODE_ISSPACE(CH(t, end - 1)))
        end--;
    if (start >= end)
        return 0;
    PyObject *span = PyTuple_New(2), *a = PyLong_FromSsize_t(start), *b = PyLong_FromSsize_t(end);
    if (span == NULL || a == NULL || b == NULL) {
        Py_XDECREF(span);
        Py_XDECREF(a);
        Py_XDECREF(b);
        return -1;
    }
    PyTuple_SET_ITEM(span, 0, a);
    PyTuple_SET_ITEM(span, 1, b);
    int failed = PyList_Append(list, span);
    Py_DECREF(span);
    return failed;
}

static PyObject *split_spans(PyObject *module, PyObject *arg)
{
    if (!PyUnicode_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "split_spans() takes a str");
        return NULL;
    }
    if (!configured) {
        PyErr_SetString(PyExc_RuntimeError, "split_spans() before configure()");
        return NULL;
    }
    if (PyUnicode_READY(arg) < 0)
        return NULL;
    text_t t = {PyUnicode_KIND(arg), PyUnicode_DATA(arg), PyUnicode_GET_LENGTH(arg)};
    PyObject *spans = PyList_New(0);
    if (spans == NULL)
        return NULL;
    Py_ssize_t i = 0;
    while (i < t.length) {
        /* a line: re.finditer(r"[^\n]+", text) */
        if (CH(&t, i) == '\n') {
            i++;
            continue;
        }
        Py_ssize_t line_start = i, line_end = i;
        while (line_end < t.length && CH(&t, line_end) != '\n')
            line_end++;
        Py_ssize_t start = line_start, k = line_start;
        while (k < line_end) {
            if (!is_stop(CH(&t, k))) {
                k++;
                continue;
            }
            int cited = 0;
            Py_ssize_t match_end = boundary_at(&t, k, line_end, &cited);
            if (match_end < 0) {
                k++;
                continue;
            }
            Py_ssize_t stop = k;
            k = match_end;
            if (!cited && is_abbreviation(&t, stop))
                continue;
            if (!next_starts_sentence(&t, match_end))
                continue;
            if (append_span(spans, &t, start, match_end) < 0)
                goto error;
            start = match_end;
        }
        if (append_span(spans, &t, start, line_end) < 0)
            goto error;
        i = line_end;
    }
    return spans;
error:
    Py_DECREF(spans);
    return NULL;
}

static int fill(word_list *list, PyObject *words)
{
    PyObject *iterator = PyObject_GetIter(words);
    if (iterator == NULL)
        return -1;
    PyObject *item;
    list->n = 0;
    while ((item = PyIter_Next(iterator)) != NULL) {
        Py_ssize_t size;
        const char *s = PyUnicode_Check(item) ? PyUnicode_AsUTF8AndSize(item, &size) : NULL;
        if (s == NULL || !PyUnicode_IS_ASCII(item) || size < 1 || size > MAX_WORD || list->n >= MAX_WORDS) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "configure() takes ASCII words of 1 to 32 characters");
            Py_DECREF(item);
            Py_DECREF(iterator);
            return -1;
        }
        memcpy(list->words[list->n], s, (size_t)size + 1);
        list->lengths[list->n] = size;
        list->n++;
        Py_DECREF(item);
    }
    Py_DECREF(iterator);
    return PyErr_Occurred() ? -1 : 0;
}

static PyObject *configure(PyObject *module, PyObject *args)
{
    PyObject *abbrevs, *names;
    if (!PyArg_ParseTuple(args, "OO:configure", &abbrevs, &names))
        return NULL;
    if (fill(&abbreviations, abbrevs) < 0 || fill(&introducers, names) < 0) {
        configured = 0;
        return NULL;
    }
    configured = 1;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"split_spans", split_spans, METH_O, "split_spans(text) -> [(start, end), ...], as core.sentences.split_spans"},
    {"configure", configure, METH_VARARGS, "configure(abbreviations, name_introducers): the word lists"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "litsum_spans", NULL, -1, methods};

PyMODINIT_FUNC PyInit_litsum_spans(void) { return PyModule_Create(&module); }

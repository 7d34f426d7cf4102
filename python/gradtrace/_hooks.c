/*
 * gradtrace._gthooks: the module forward pre/post hooks of _scopes.py in
 * C, for their common case only.
 *
 * The Python hooks (_scopes._pre_hook/_post_hook) stay the definition:
 * this file does exactly what they do when the module is already mapped
 * and the thread's stack is in order, reading and writing the same
 * Python state (the threading.local's stack, ents and root_map lists,
 * the _known registry, the registry entries), and hands every other call
 * to them unchanged: a module not yet mapped, a new root, a stale call
 * left open by an exception, anything unexpected. So both can run in one
 * process, in any mix, and behaviour is the Python hooks' by
 * construction.
 *
 * The agent's gt_module_begin/gt_module_end are called through the
 * addresses ctypes found for them (setup()), so this extension links
 * nothing of gradtrace and loads wherever CPython does. Errors are never
 * raised into the model: any failure clears the error and returns None,
 * as the Python hooks' `except Exception: pass` does.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <structmember.h>

#include <stddef.h>
#include <stdint.h>

typedef void (*begin_fn)(uint32_t path_id, uint32_t class_id);
typedef void (*end_fn)(void);

static begin_fn gt_begin;
static end_fn gt_end;
static PyObject *tls;           /* _scopes._tls (a threading.local) */
static PyObject *known;         /* _naming._known */
static PyObject *py_pre;        /* _scopes._pre_hook: everything else */
static PyObject *py_post;
static PyObject *s_stack, *s_ents, *s_root_map, *s_dict;
/* This thread's tls.stack and tls.ents: _scopes.py sets them once per
 * thread (_Thread.__init__) and only appends and pops after, so they are
 * looked up once and kept (a reference each; a thread that ends leaves
 * two small lists behind). root_map is reassigned and read every time. */
static _Thread_local PyObject *t_stack, *t_ents;
/* This thread's tls.__dict__ (a threading.local keeps one dict per thread,
 * the same one for the thread's life), so root_map is one dict lookup
 * instead of threading.local's attribute path. */
static _Thread_local PyObject *t_dict;

/* Registry entry fields (see _naming.py): (weakref, path, path_id,
 * class_id, map, _Root, opens a scope). */
enum { E_REF, E_PATH, E_PATH_ID, E_CLASS_ID, E_MAP, E_ROOT, E_OPENS, E_N };

/* ent when it is an entry of module (its weakref still points at it). */
static PyObject *entry_of(PyObject *map, PyObject *module)
{
    PyObject *key, *ent, *obj;

    if (!PyDict_Check(map))
        return NULL;
    key = PyLong_FromVoidPtr(module);   /* id(module) */
    if (!key)
        return NULL;
    ent = PyDict_GetItemWithError(map, key);
    Py_DECREF(key);
    if (!ent || !PyTuple_CheckExact(ent) || PyTuple_GET_SIZE(ent) != E_N ||
        !PyWeakref_CheckRef(PyTuple_GET_ITEM(ent, E_REF)))
        return NULL;
    obj = PyWeakref_GetObject(PyTuple_GET_ITEM(ent, E_REF));
    return obj == module ? ent : NULL;
}

static int in_stack(PyObject *stack, PyObject *module)
{
    Py_ssize_t n = PyList_GET_SIZE(stack);

    for (Py_ssize_t i = 0; i < n; i++)
        if (PyList_GET_ITEM(stack, i) == module)
            return 1;
    return 0;
}

/* Borrowed: this thread's stack and ents lists (and its tls dict in
 * t_dict). @return 0, or -1. */
static int thread_lists(PyObject **stack, PyObject **ents)
{
    if (!t_stack) {
        PyObject *s = PyObject_GetAttr(tls, s_stack);
        PyObject *e = s ? PyObject_GetAttr(tls, s_ents) : NULL;
        PyObject *d = e ? PyObject_GetAttr(tls, s_dict) : NULL;

        if (!d || !PyList_CheckExact(s) || !PyList_CheckExact(e) ||
            !PyDict_CheckExact(d)) {
            Py_XDECREF(s);
            Py_XDECREF(e);
            Py_XDECREF(d);
            return -1;
        }
        t_stack = s;
        t_ents = e;
        t_dict = d;
    }
    *stack = t_stack;
    *ents = t_ents;
    return 0;
}

static PyObject *call_py(PyObject *fn, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *r = PyObject_Vectorcall(fn, args, (size_t)nargs, NULL);

    if (!r)
        PyErr_Clear();
    Py_XDECREF(r);
    Py_RETURN_NONE;
}

/* Opens module's scope when ent says so. */
static void open_scope(PyObject *ent)
{
    if (PyTuple_GET_ITEM(ent, E_OPENS) != Py_True)
        return;
    long path = PyLong_AsLong(PyTuple_GET_ITEM(ent, E_PATH_ID));
    long cls = PyLong_AsLong(PyTuple_GET_ITEM(ent, E_CLASS_ID));

    if (PyErr_Occurred()) {
        PyErr_Clear();
        return;
    }
    gt_begin((uint32_t)path, (uint32_t)cls);
}

/* The fast pre-hook. @return 1 done, 0 the Python hook must run, -1 on
 * an error after which the Python hook must not run (state changed). */
static int pre_fast(PyObject *module)
{
    PyObject *stack, *ents, *map = NULL, *ent;
    int rc = 0;

    if (thread_lists(&stack, &ents) < 0)
        goto out;
    if (PyList_GET_SIZE(stack) > 0) {
        if (in_stack(stack, module))
            goto out;               /* a stale call: the Python hook */
        map = PyDict_GetItemWithError(t_dict, s_root_map);   /* borrowed */
        if (!map || !(ent = entry_of(map, module)))
            goto out;
    } else {
        if (!(ent = entry_of(known, module)))
            goto out;
        if (PyDict_SetItem(t_dict, s_root_map, PyTuple_GET_ITEM(ent, E_MAP)) < 0)
            goto out;
    }
    if (PyList_Append(stack, module) < 0)
        goto out;
    if (PyList_Append(ents, ent) < 0) {
        rc = -1;                    /* stack grew: no second push */
        goto out;
    }
    open_scope(ent);
    rc = 1;
out:
    if (PyErr_Occurred())
        PyErr_Clear();
    return rc;
}

static PyObject *pre_hook(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 2 || !gt_begin)
        Py_RETURN_NONE;
    if (pre_fast(args[0]) == 0)
        return call_py(py_pre, args, nargs);
    Py_RETURN_NONE;
}

/* The fast post-hook: the module on top of the stack. @return 1 done,
 * 0 the Python hook must run. */
static int post_fast(PyObject *module)
{
    PyObject *stack, *ents, *ent;
    Py_ssize_t n;
    int rc = 0;

    if (thread_lists(&stack, &ents) < 0)
        goto out;
    n = PyList_GET_SIZE(stack);
    if (n == 0) {
        rc = 1;                     /* nothing open: nothing to close */
        goto out;
    }
    if (PyList_GET_ITEM(stack, n - 1) != module ||
        PyList_GET_SIZE(ents) != n)
        goto out;
    /* Pop both: the lists shrink in place (their storage stays for the
     * next push, as list.pop leaves it), the references move to us. */
    ent = PyList_GET_ITEM(ents, n - 1);
    Py_SET_SIZE(stack, n - 1);
    Py_SET_SIZE(ents, n - 1);
    Py_DECREF(module);      /* the stack's; the caller still holds one */
    if (PyTuple_CheckExact(ent) && PyTuple_GET_SIZE(ent) == E_N &&
        PyTuple_GET_ITEM(ent, E_OPENS) == Py_True)
        gt_end();
    Py_DECREF(ent);
    rc = 1;
out:
    if (PyErr_Occurred())
        PyErr_Clear();
    return rc;
}

static PyObject *post_hook(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 3 || !gt_end)
        Py_RETURN_NONE;
    if (!post_fast(args[0]))
        return call_py(py_post, args, nargs);
    Py_RETURN_NONE;
}

static void set_ref(PyObject **slot, PyObject *v)
{
    Py_XINCREF(v);
    Py_XSETREF(*slot, v);
}

/* ------------------------------------------- nn.Module.__call__ in C
 *
 * The package reaches torch by replacing nn.Module.__call__ (so torch's
 * no-hooks fast path stays) with the Python form of _switch.py
 * (_make_wrapper): a real Python function, so that whatever reads it --
 * torch.compile's dynamo above all, which reads nn.Module.__call__ from
 * the class dict, binds it (OptimizedModule keeps the bound
 * module.__call__ it found when torch.compile ran) and traces its
 * bytecode -- finds Python it can trace, and through the form's
 * torch.compiler.is_compiling() check, traces torch's own __call__ and
 * nothing of ours. fast_call(form, on, orig) gives that same function a
 * C vectorcall (PEP 590: a function's vectorcall field is how CPython's
 * C code calls it), which does what the form's bytecode does without a
 * Python frame: while on[0] is True, the pre-hook, orig, then the
 * post-hook, also when orig raised (its exception kept as it was);
 * otherwise orig alone. So module(x), which CPython runs through the
 * type's call slot and thus the vectorcall, costs what a C __call__
 * does, while no tracer can ever meet a C object where it looks for
 * nn.Module.__call__: the hooks stay out of compiled graphs by what the
 * function is, not by when it is swapped.
 *
 * Where a PEP 523 frame hook is installed (dynamo installs one while a
 * thread runs a compiled region's entry: torch.compile's wrapper of the
 * bound __call__ it kept), every frame may be one dynamo compiles. There
 * the vectorcall still runs the C hooks and orig, so the frames dynamo
 * meets are torch's own, as without gradtrace (running the bytecode
 * instead would make dynamo compile our frame: the same graph, but its
 * inputs named after our *args), and never a Python hook of ours: a call
 * whose pre-hook needs Python runs orig alone, opening no scope (in the
 * compiling thread that is a call dynamo compiles, whose scope would be
 * folded out anyway; another thread's first call of a module not yet
 * mapped loses its scope while dynamo runs there), and a post-hook that
 * needs Python is left to the next hook that finds the call stale. The
 * bytecode runs where the vectorcall cannot (no table entry, no module
 * argument), and where an interpreter inlines a direct call of the
 * function in its bytecode (3.11 does for mod.__call__(x) and
 * super().__call__(x)): the same behaviour, more slowly.
 *
 * The forms given a vectorcall are kept here with their `on` list and
 * original (references held for the process's life: nn.Module.__call__
 * and OptimizedModule's bound calls outlive any hooks-off). Each form has
 * its own on and orig, so two of them (another library wrapped ours
 * between a hooks-off and a hooks-on, and the package wrapped that) never
 * both run the hooks.
 */
#define FORMS_MAX 8

static struct form {
    PyObject *func;             /* the Python form */
    PyObject *on;               /* its one-element list: run the hooks */
    PyObject *orig;             /* nn.Module.__call__ before it */
} forms[FORMS_MAX];
static int n_forms;

static PyObject *args_tuple(PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *t = PyTuple_New(nargs);

    for (Py_ssize_t i = 0; t && i < nargs; i++) {
        Py_INCREF(args[i]);
        PyTuple_SET_ITEM(t, i, args[i]);
    }
    return t;
}

/* The Python hook for what the fast path leaves: fn(module, args[, None]),
 * args being the call's positional arguments after the module. */
static void call_py_hook(PyObject *fn, PyObject *const *args, Py_ssize_t nargs,
                         int post)
{
    PyObject *t = args_tuple(args + 1, nargs - 1);
    PyObject *v[3] = {args[0], t, Py_None};

    if (t) {
        Py_DECREF(call_py(fn, v, post ? 3 : 2));
        Py_DECREF(t);
    } else {
        PyErr_Clear();
    }
}

/* Whether frames run as CPython runs them (no PEP 523 hook such as
 * dynamo's is installed in this interpreter). */
static int default_eval_frame(void)
{
#if PY_VERSION_HEX < 0x03090000
    return 0;                   /* no way to tell: the bytecode always */
#else
    return _PyInterpreterState_GetEvalFrameFunc(PyInterpreterState_Get()) ==
           _PyEval_EvalFrameDefault;
#endif
}

static PyObject *form_vectorcall(PyObject *func, PyObject *const *args,
                                 size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    struct form *f = NULL;
    PyObject *r, *et, *ev, *tb;
    int eager;

    for (int i = 0; i < n_forms; i++) {
        if (forms[i].func == func) {
            f = &forms[i];
            break;
        }
    }
    if (!f || nargs < 1 || !gt_begin || PyList_GET_SIZE(f->on) < 1)
        return _PyFunction_Vectorcall(func, args, nargsf, kwnames);
    if (PyList_GET_ITEM(f->on, 0) != Py_True)
        return PyObject_Vectorcall(f->orig, args, nargsf, kwnames);
    eager = default_eval_frame();
    if (pre_fast(args[0]) == 0) {
        if (!eager)             /* nothing done yet: torch's call alone */
            return PyObject_Vectorcall(f->orig, args, nargsf, kwnames);
        call_py_hook(py_pre, args, nargs, 0);
    }
    r = PyObject_Vectorcall(f->orig, args, nargsf, kwnames);
    PyErr_Fetch(&et, &ev, &tb);         /* the call's exception, if any */
    /* The Python post-hook only where no frame hook may trace it; a call
     * it would have closed is closed by the next hook that finds it stale
     * (_scopes._close_stale). */
    if (!post_fast(args[0]) && eager)
        call_py_hook(py_post, args, nargs, 1);
    PyErr_Restore(et, ev, tb);
    return r;
}

/* fast_call(form, on, orig): gives the Python form its C vectorcall.
 * @return True, or False when the table is full (the form then runs as
 * Python). */
static PyObject *fast_call(PyObject *self, PyObject *args)
{
    PyObject *func, *on, *orig;

    (void)self;
    if (!PyArg_ParseTuple(args, "O!O!O:fast_call", &PyFunction_Type, &func,
                          &PyList_Type, &on, &orig))
        return NULL;
    if (!PyCallable_Check(orig)) {
        PyErr_SetString(PyExc_TypeError, "fast_call: orig is not callable");
        return NULL;
    }
    for (int i = 0; i < n_forms; i++)
        if (forms[i].func == func)
            Py_RETURN_TRUE;
    if (n_forms == FORMS_MAX)
        Py_RETURN_FALSE;
    Py_INCREF(func);
    Py_INCREF(on);
    Py_INCREF(orig);
    forms[n_forms++] = (struct form){func, on, orig};
#if PY_VERSION_HEX >= 0x030C0000
    PyFunction_SetVectorcall((PyFunctionObject *)func, form_vectorcall);
#else
    ((PyFunctionObject *)func)->vectorcall = form_vectorcall;
#endif
    Py_RETURN_TRUE;
}

/* A hook that does nothing, in C: what torch's own hook path costs is
 * measured with it (tests/bench/bench_torch.py). */
static PyObject *noop(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    (void)args;
    (void)nargs;
    Py_RETURN_NONE;
}

/* setup(begin_addr, end_addr, tls, known, py_pre, py_post) */
static PyObject *setup(PyObject *self, PyObject *args)
{
    unsigned long long b, e;
    PyObject *t, *k, *pp, *po;

    (void)self;
    if (!PyArg_ParseTuple(args, "KKOO!OO", &b, &e, &t, &PyDict_Type, &k, &pp, &po))
        return NULL;
    if (!b || !e || !PyCallable_Check(pp) || !PyCallable_Check(po)) {
        PyErr_SetString(PyExc_ValueError, "setup: bad arguments");
        return NULL;
    }
    if (t != tls) {
        /* Another registry: this thread's cached lists are not its.
         * (Other threads keep theirs: setup is for tests and start-up.) */
        Py_CLEAR(t_stack);
        Py_CLEAR(t_ents);
        Py_CLEAR(t_dict);
    }
    set_ref(&tls, t);
    set_ref(&known, k);
    set_ref(&py_pre, pp);
    set_ref(&py_post, po);
    gt_begin = (begin_fn)(uintptr_t)b;
    gt_end = (end_fn)(uintptr_t)e;
    Py_RETURN_NONE;
}

/* ------------------------------------------------ compiled regions
 *
 * _compile_run.wrap's wrapper in C: region(orig, graph) is a callable that
 * calls gt_compiled_begin(graph), orig with the same arguments, and
 * gt_compiled_end(graph) also when orig raised (with the exception set
 * aside meanwhile, so it reaches the caller unchanged). The
 * Python form of the same wrapper costs about 3 us a call in ctypes;
 * this one a C call each side. */
typedef void (*region_fn)(uint32_t graph);
static region_fn rg_begin, rg_end;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vc;
    PyObject *orig;
    unsigned int graph;
} Region;

static PyObject *region_vc(PyObject *self, PyObject *const *args,
                           size_t nargsf, PyObject *kwnames)
{
    Region *r = (Region *)self;
    PyObject *res;

    rg_begin(r->graph);
    res = PyObject_Vectorcall(r->orig, args, nargsf, kwnames);
    if (res) {
        rg_end(r->graph);
    } else {
        /* The call's exception stays the caller's whatever end does. */
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        rg_end(r->graph);
        PyErr_Restore(et, ev, tb);
    }
    return res;
}

static int region_traverse(PyObject *self, visitproc visit, void *arg)
{
    Py_VISIT(((Region *)self)->orig);
    return 0;
}

static int region_clear(PyObject *self)
{
    Py_CLEAR(((Region *)self)->orig);
    return 0;
}

static void region_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    region_clear(self);
    Py_TYPE(self)->tp_free(self);
}

static PyMemberDef region_members[] = {
    {"_gradtrace_graph", T_UINT, offsetof(Region, graph), READONLY,
     "the map number its runs are regions of"},
    {"__wrapped__", T_OBJECT, offsetof(Region, orig), READONLY,
     "the wrapper module's own call"},
    {NULL, 0, 0, 0, NULL},
};

#ifndef Py_TPFLAGS_HAVE_VECTORCALL
#define Py_TPFLAGS_HAVE_VECTORCALL _Py_TPFLAGS_HAVE_VECTORCALL
#endif

static PyTypeObject RegionType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "gradtrace._gthooks.Region",
    .tp_basicsize = sizeof(Region),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC |
                Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "a compiled graph's call, run as a gradtrace region",
    .tp_vectorcall_offset = offsetof(Region, vc),
    .tp_call = PyVectorcall_Call,
    .tp_traverse = region_traverse,
    .tp_clear = region_clear,
    .tp_dealloc = region_dealloc,
    .tp_members = region_members,
};

/* region_setup(begin_addr, end_addr): gt_compiled_begin/end. */
static PyObject *region_setup(PyObject *self, PyObject *args)
{
    unsigned long long b, e;

    (void)self;
    if (!PyArg_ParseTuple(args, "KK", &b, &e))
        return NULL;
    if (!b || !e) {
        PyErr_SetString(PyExc_ValueError, "region_setup: bad arguments");
        return NULL;
    }
    rg_begin = (region_fn)(uintptr_t)b;
    rg_end = (region_fn)(uintptr_t)e;
    Py_RETURN_NONE;
}

/* region(orig, graph) -> Region */
static PyObject *region_new(PyObject *self, PyObject *args)
{
    PyObject *orig;
    unsigned int graph;
    Region *r;

    (void)self;
    if (!PyArg_ParseTuple(args, "OI:region", &orig, &graph))
        return NULL;
    if (!rg_begin || !rg_end || !PyCallable_Check(orig)) {
        PyErr_SetString(PyExc_ValueError,
                        "region: no region_setup, or orig not callable");
        return NULL;
    }
    if (!(r = PyObject_GC_New(Region, &RegionType)))
        return NULL;
    r->vc = region_vc;
    Py_INCREF(orig);
    r->orig = orig;
    r->graph = graph;
    PyObject_GC_Track((PyObject *)r);
    return (PyObject *)r;
}

static PyMethodDef methods[] = {
    {"region_setup", region_setup, METH_VARARGS,
     "region_setup(begin_addr, end_addr): gt_compiled_begin/end"},
    {"region", region_new, METH_VARARGS,
     "region(orig, graph): orig's runs as regions of map graph"},
    {"setup", setup, METH_VARARGS,
     "setup(begin_addr, end_addr, tls, known, py_pre_hook, py_post_hook)"},
    {"pre_hook", (PyCFunction)(void (*)(void))pre_hook, METH_FASTCALL,
     "pre_hook(module, args): _scopes._pre_hook, its common case in C"},
    {"post_hook", (PyCFunction)(void (*)(void))post_hook, METH_FASTCALL,
     "post_hook(module, args, output): _scopes._post_hook, likewise"},
    {"fast_call", fast_call, METH_VARARGS,
     "fast_call(form, on, orig): the Python __call__ form, run in C"},
    {"noop", (PyCFunction)(void (*)(void))noop, METH_FASTCALL,
     "noop(*args): returns None (a baseline for hook costs)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moddef = {
    PyModuleDef_HEAD_INIT, "_gthooks",
    "gradtrace's module hooks in C (see _naming.py)", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__gthooks(void);

PyMODINIT_FUNC PyInit__gthooks(void)
{
    s_stack = PyUnicode_InternFromString("stack");
    s_ents = PyUnicode_InternFromString("ents");
    s_root_map = PyUnicode_InternFromString("root_map");
    s_dict = PyUnicode_InternFromString("__dict__");
    if (!s_stack || !s_ents || !s_root_map || !s_dict)
        return NULL;
    if (PyType_Ready(&RegionType) < 0)
        return NULL;
    return PyModule_Create(&moddef);
}

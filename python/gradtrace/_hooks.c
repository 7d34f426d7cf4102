/*
 * gradtrace._gthooks: the module forward pre/post hooks of _modules.py in
 * C, for their common case only.
 *
 * The Python hooks (_modules._pre_hook/_post_hook) stay the definition:
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

#include <stddef.h>
#include <stdint.h>
#include <structmember.h>

typedef void (*begin_fn)(uint32_t path_id, uint32_t class_id);
typedef void (*end_fn)(void);

static begin_fn gt_begin;
static end_fn gt_end;
static PyObject *tls;           /* _modules._tls (a threading.local) */
static PyObject *known;         /* _modules._known */
static PyObject *py_pre;        /* _modules._pre_hook: everything else */
static PyObject *py_post;
static PyObject *s_stack, *s_ents, *s_root_map, *s_dict;
/* This thread's tls.stack and tls.ents: _modules.py sets them once per
 * thread (_Thread.__init__) and only appends and pops after, so they are
 * looked up once and kept (a reference each; a thread that ends leaves
 * two small lists behind). root_map is reassigned and read every time. */
static _Thread_local PyObject *t_stack, *t_ents;
/* This thread's tls.__dict__ (a threading.local keeps one dict per thread,
 * the same one for the thread's life), so root_map is one dict lookup
 * instead of threading.local's attribute path. */
static _Thread_local PyObject *t_dict;

/* Registry entry fields (see _modules.py): (weakref, path, path_id,
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
 * no-hooks fast path stays). Call(original) is that __call__ in C, doing
 * what _modules._make_wrapper's Python __call__ does without a Python
 * frame: while its `on` is true, the pre-hook, the original __call__,
 * then the post-hook, also when the call raised (its exception kept as
 * it was); while off, the original alone. Its hooks are pre_hook and
 * post_hook above, falling back to the Python hooks exactly as they do.
 *
 * A Call is a method descriptor (Py_TPFLAGS_METHOD_DESCRIPTOR), as a
 * Python function is: module(x) reaches it through the type's __call__
 * slot as Call(module, x), without a bound-method object, and the vector
 * of arguments (module first) goes on to the original as it came. Each
 * Call keeps its own original and its own `on`, so two of them (one
 * wrapped by another library between a hooks-off and a hooks-on) never
 * call each other or both run the hooks.
 */
typedef struct {
    PyObject_HEAD
    PyObject *orig;             /* nn.Module.__call__ before this one */
    vectorcallfunc vectorcall;
    char on;                    /* run the hooks */
} call_object;

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

static PyObject *call_vectorcall(PyObject *callable, PyObject *const *args,
                                 size_t nargsf, PyObject *kwnames)
{
    call_object *c = (call_object *)callable;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject *r, *et, *ev, *tb;

    if (nargs < 1) {
        PyErr_SetString(PyExc_TypeError, "__call__ needs the module");
        return NULL;
    }
    if (!c->on || !gt_begin)
        return PyObject_Vectorcall(c->orig, args, nargsf, kwnames);
    if (pre_fast(args[0]) == 0)
        call_py_hook(py_pre, args, nargs, 0);
    r = PyObject_Vectorcall(c->orig, args, nargsf, kwnames);
    PyErr_Fetch(&et, &ev, &tb);         /* the call's exception, if any */
    if (!post_fast(args[0]))
        call_py_hook(py_post, args, nargs, 1);
    PyErr_Restore(et, ev, tb);
    return r;
}

static PyObject *call_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    PyObject *orig;
    call_object *c;

    if (kw && PyDict_GET_SIZE(kw) > 0) {
        PyErr_SetString(PyExc_TypeError, "Call takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "O:Call", &orig))
        return NULL;
    if (!PyCallable_Check(orig)) {
        PyErr_SetString(PyExc_TypeError, "Call: the original is not callable");
        return NULL;
    }
    c = (call_object *)type->tp_alloc(type, 0);
    if (!c)
        return NULL;
    Py_INCREF(orig);
    c->orig = orig;
    c->vectorcall = call_vectorcall;
    c->on = 0;
    return (PyObject *)c;
}

static void call_dealloc(PyObject *self)
{
    call_object *c = (call_object *)self;

    PyObject_GC_UnTrack(self);
    Py_CLEAR(c->orig);
    Py_TYPE(self)->tp_free(self);
}

static int call_traverse(PyObject *self, visitproc visit, void *arg)
{
    Py_VISIT(((call_object *)self)->orig);
    return 0;
}

static int call_clear(PyObject *self)
{
    Py_CLEAR(((call_object *)self)->orig);
    return 0;
}

/* Module.__call__ looked up on an instance: bound, as a function is. */
static PyObject *call_get(PyObject *self, PyObject *obj, PyObject *type)
{
    (void)type;
    if (obj == NULL || obj == Py_None) {
        Py_INCREF(self);
        return self;
    }
    return PyMethod_New(self, obj);
}

static PyObject *call_name(PyObject *self, void *closure)
{
    (void)self;
    (void)closure;
    return PyUnicode_FromString("__call__");
}

static PyMemberDef call_members[] = {
    {"on", T_BOOL, offsetof(call_object, on), 0,
     "whether the call runs gradtrace's module hooks"},
    {"__wrapped__", T_OBJECT, offsetof(call_object, orig), READONLY,
     "the original __call__"},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef call_getset[] = {
    {"__name__", call_name, NULL, NULL, NULL},
    {"__qualname__", call_name, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject call_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "gradtrace._gthooks.Call",
    .tp_doc = "Call(original): nn.Module.__call__ with gradtrace's module "
              "scopes (python/gradtrace/_hooks.c)",
    .tp_basicsize = sizeof(call_object),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC |
                Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_new = call_new,
    .tp_dealloc = call_dealloc,
    .tp_traverse = call_traverse,
    .tp_clear = call_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(call_object, vectorcall),
    .tp_descr_get = call_get,
    .tp_members = call_members,
    .tp_getset = call_getset,
};

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

static PyMethodDef methods[] = {
    {"setup", setup, METH_VARARGS,
     "setup(begin_addr, end_addr, tls, known, py_pre_hook, py_post_hook)"},
    {"pre_hook", (PyCFunction)(void (*)(void))pre_hook, METH_FASTCALL,
     "pre_hook(module, args): _modules._pre_hook, its common case in C"},
    {"post_hook", (PyCFunction)(void (*)(void))post_hook, METH_FASTCALL,
     "post_hook(module, args, output): _modules._post_hook, likewise"},
    {"noop", (PyCFunction)(void (*)(void))noop, METH_FASTCALL,
     "noop(*args): returns None (a baseline for hook costs)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moddef = {
    PyModuleDef_HEAD_INIT, "_gthooks",
    "gradtrace's module hooks in C (see _modules.py)", -1, methods,
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
    if (PyType_Ready(&call_type) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&moddef);
    if (!m)
        return NULL;
    Py_INCREF(&call_type);
    if (PyModule_AddObject(m, "Call", (PyObject *)&call_type) < 0) {
        Py_DECREF(&call_type);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

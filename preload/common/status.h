/*
 * status.h: the project's status codes and the macros that propagate them.
 *
 * Every project function that can fail returns dh_status_t. The list below is the only
 * place a status is declared: it generates the enum, dh_strerror and dh_status_name, so
 * a new code cannot be added without a message. Wrappers of the intercepted APIs never
 * return these to the application (STYLE.md 2): they return the real API's type.
 */
#ifndef DH_STATUS_H
#define DH_STATUS_H

/* X(name, message) */
#define DH_STATUS_LIST(X)                                                   \
    X(DH_OK, "success")                                                     \
    X(DH_ERR_NOMEM, "out of memory")                                        \
    X(DH_ERR_INVALID, "invalid argument")                                   \
    X(DH_ERR_PARSE, "malformed input")                                      \
    X(DH_ERR_RANGE, "value out of range")                                   \
    X(DH_ERR_IO, "input/output error")                                      \
    X(DH_ERR_NOT_FOUND, "not found")                                        \
    X(DH_ERR_UNSUPPORTED, "not supported")                                  \
    X(DH_ERR_STATE, "operation not valid in the current state")             \
    X(DH_ERR_INTERNAL, "internal error")

typedef enum dh_status {
#define DH__STATUS_ENUM(name, msg) name,
    DH_STATUS_LIST(DH__STATUS_ENUM)
#undef DH__STATUS_ENUM
    DH_STATUS_COUNT
} dh_status_t;

/* Returns the status's one-line message ("out of memory"), or "unknown status" for a value
 * outside the list. Never NULL; the string is static. Thread-safe. */
const char *dh_strerror(dh_status_t st);

/* Returns the status's enumerator name ("DH_ERR_NOMEM"), or "DH_STATUS_UNKNOWN". Static
 * string; thread-safe. */
const char *dh_status_name(dh_status_t st);

/* Logs "<file>:<line> -> <name>" at debug level (subsystem core) so that an error's path
 * through the callers can be followed with DHELIX_LOG=debug. Used by the macros below;
 * thread-safe. */
void dh__status_trace(const char *file, int line, dh_status_t st);

/* Evaluates call once; when it is not DH_OK, traces it and returns it from the caller,
 * which must itself return dh_status_t. */
#define DH_CHECK(call)                                                      \
    do {                                                                    \
        dh_status_t dh__st_ = (call);                                       \
        if (dh__st_ != DH_OK) {                                             \
            dh__status_trace(__FILE__, __LINE__, dh__st_);                  \
            return dh__st_;                                                 \
        }                                                                   \
    } while (0)

/* Evaluates call once into rc; when it is not DH_OK, traces it and jumps to label (the
 * caller's cleanup path, which returns rc). */
#define DH_CHECK_GOTO(call, rc, label)                                      \
    do {                                                                    \
        (rc) = (call);                                                      \
        if ((rc) != DH_OK) {                                                \
            dh__status_trace(__FILE__, __LINE__, (rc));                     \
            goto label;                                                     \
        }                                                                   \
    } while (0)

/* The project version ("0.1.0"), from the CMake project() call. Static string. */
const char *dh_version(void);

#endif

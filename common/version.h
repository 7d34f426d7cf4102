/* gradtrace's release version, shared by the programs and the converter. */
#ifndef GRADTRACE_COMMON_VERSION_H
#define GRADTRACE_COMMON_VERSION_H

#define GT__VERSION "0.1.0"

#endif

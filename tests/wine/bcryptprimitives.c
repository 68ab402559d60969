/* The Wine test rig's bcryptprimitives.dll (never shipped: real Windows has this DLL). Rust's standard library calls
 * ProcessPrng from bcryptprimitives.dll at start-up and Wine 8 has no such DLL, so every Rust .exe would exit with
 * code 53. This one exports ProcessPrng over RtlGenRandom. tests/support/wine.rs builds it with
 *   x86_64-w64-mingw32-gcc -shared -O2 -s -o bcryptprimitives.dll bcryptprimitives.c -ladvapi32
 * and copies it into the prefix's system32. */
#include <windows.h>
BOOLEAN WINAPI SystemFunction036(PVOID buf, ULONG len); /* RtlGenRandom, advapi32 */

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len)
{
    while (len) {
        ULONG n = len > 0x10000000 ? 0x10000000 : (ULONG)len;
        if (!SystemFunction036(data, n)) return FALSE;
        data += n; len -= n;
    }
    return TRUE;
}

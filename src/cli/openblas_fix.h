#ifndef AG_OPENBLAS_FIX_H
#define AG_OPENBLAS_FIX_H

/* Restarts the program with OPENBLAS_CORETYPE set when OpenBLAS misdetected
   the CPU as an old one (see openblas_fix.c). Call first thing in main. */
void openblas_fix_coretype(char **argv);

#endif

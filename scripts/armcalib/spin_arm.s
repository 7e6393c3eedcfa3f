#include "textflag.h"

// func spin(n uint32)
TEXT ·spin(SB), NOSPLIT|NOFRAME, $0-4
	MOVW	n+0(FP), R0
	MOVW	$0, R1
loop:
	ADD	$1, R1
	CMP	$0, R1
	MOVW.EQ	R1, R2 // never executed: R1 is at least 1
	SUB.S	$1, R0
	BNE	loop
	RET

package io.groupfit.kafka.core;

/**
 * The natural order of consumer ids ("c2" before "c10"), as {@code app.core.model.consumer_sort_key} orders them:
 * the id split into text and digit runs (Unicode decimal digits, as Python's {@code \d}), compared chunk by chunk,
 * text by code point, digit runs by their value; ids whose chunks are equal ("c007", "c7") by the id itself, code
 * point by code point, so no two distinct ids tie. Each key starts and ends with a text chunk, possibly empty; a key
 * that is a prefix of the other is the smaller.
 */
public final class Natural {
    private Natural() {}

    /** Negative, zero or positive as {@code a} sorts before, with or after {@code b} (zero only when equal). */
    public static int compare(String a, String b) {
        int order = compareChunks(a, b);
        return order != 0 ? order : compareCodePoints(a, b);
    }

    /** {@link #compareAscii}'s answer when it meets a character beyond ASCII before it could decide. */
    private static final int NOT_ASCII = Integer.MIN_VALUE;

    private static int compareChunks(String a, String b) {
        int ascii = compareAscii(a, b);
        if (ascii != NOT_ASCII) {
            return ascii;
        }
        int i = 0;
        int j = 0;
        boolean digits = false;
        while (true) {
            int ie = chunkEnd(a, i, digits);
            int je = chunkEnd(b, j, digits);
            int order = digits ? compareNumbers(a, i, ie, b, j, je) : compareText(a, i, ie, b, j, je);
            if (order != 0) {
                return order;
            }
            if (!digits) {
                boolean aDone = ie == a.length();
                boolean bDone = je == b.length();
                if (aDone || bDone) {
                    return aDone == bDone ? 0 : aDone ? -1 : 1;
                }
            }
            i = ie;
            j = je;
            digits = !digits;
        }
    }

    /**
     * The same order char by char while the chars read are ASCII (the common case: no code points, no Unicode
     * digits), in one pass; {@link #NOT_ASCII} when it meets another char before deciding. What follows the point
     * of decision cannot change it, except a Unicode digit continuing a digit run: a run is read up to the first
     * char that is not an ASCII digit, which must be ASCII too.
     */
    private static int compareAscii(String a, String b) {
        int i = 0;
        int j = 0;
        int na = a.length();
        int nb = b.length();
        while (i < na && j < nb) {
            char x = a.charAt(i);
            char y = b.charAt(j);
            if (x >= 0x80 || y >= 0x80) {
                return NOT_ASCII;
            }
            boolean digitX = x >= '0' && x <= '9';
            boolean digitY = y >= '0' && y <= '9';
            if (digitX && digitY) {
                int ie = asciiDigitsEnd(a, i);
                int je = asciiDigitsEnd(b, j);
                if (ie < 0 || je < 0) {
                    return NOT_ASCII;
                }
                int order = compareAsciiNumbers(a, i, ie, b, j, je);
                if (order != 0) {
                    return order;
                }
                i = ie;
                j = je;
            } else if (digitX != digitY) {
                // a digit run against text: the text chunk that ends here is the shorter, so it sorts first
                return digitX ? -1 : 1;
            } else {
                if (x != y) {
                    return x - y;
                }
                i++;
                j++;
            }
        }
        return (i < na ? 1 : 0) - (j < nb ? 1 : 0);
    }

    /** The end of the ASCII digit run from {@code from}, or -1 when a char beyond ASCII follows it. */
    private static int asciiDigitsEnd(String s, int from) {
        int k = from;
        while (k < s.length()) {
            char c = s.charAt(k);
            if (c >= 0x80) {
                return -1;
            }
            if (c < '0' || c > '9') {
                break;
            }
            k++;
        }
        return k;
    }

    /** Two ASCII digit runs by value: leading zeros skipped, then the longer is larger, then digit by digit. */
    private static int compareAsciiNumbers(String a, int i, int ie, String b, int j, int je) {
        while (i < ie && a.charAt(i) == '0') {
            i++;
        }
        while (j < je && b.charAt(j) == '0') {
            j++;
        }
        if (ie - i != je - j) {
            return Integer.compare(ie - i, je - j);
        }
        for (; i < ie; i++, j++) {
            if (a.charAt(i) != b.charAt(j)) {
                return a.charAt(i) - b.charAt(j);
            }
        }
        return 0;
    }

    private static int chunkEnd(String s, int from, boolean digits) {
        int k = from;
        while (k < s.length()) {
            int cp = s.codePointAt(k);
            if (Character.isDigit(cp) != digits) {
                break;
            }
            k += Character.charCount(cp);
        }
        return k;
    }

    private static int compareText(String a, int i, int ie, String b, int j, int je) {
        while (i < ie && j < je) {
            int x = a.codePointAt(i);
            int y = b.codePointAt(j);
            if (x != y) {
                return Integer.compare(x, y);
            }
            i += Character.charCount(x);
            j += Character.charCount(y);
        }
        return (i < ie ? 1 : 0) - (j < je ? 1 : 0);
    }

    /** Two digit runs by value: leading zeros skipped, then the longer is larger, then digit by digit. */
    private static int compareNumbers(String a, int i, int ie, String b, int j, int je) {
        i = skipZeros(a, i, ie);
        j = skipZeros(b, j, je);
        int lengthA = a.codePointCount(i, ie);
        int lengthB = b.codePointCount(j, je);
        if (lengthA != lengthB) {
            return Integer.compare(lengthA, lengthB);
        }
        while (i < ie) {
            int x = a.codePointAt(i);
            int y = b.codePointAt(j);
            int order = Integer.compare(Character.digit(x, 10), Character.digit(y, 10));
            if (order != 0) {
                return order;
            }
            i += Character.charCount(x);
            j += Character.charCount(y);
        }
        return 0;
    }

    private static int skipZeros(String s, int from, int end) {
        while (from < end) {
            int cp = s.codePointAt(from);
            if (Character.digit(cp, 10) != 0) {
                break;
            }
            from += Character.charCount(cp);
        }
        return from;
    }

    /** Strings by code point, as Python compares them (String.compareTo compares UTF-16 units). */
    public static int compareCodePoints(String a, String b) {
        return compareText(a, 0, a.length(), b, 0, b.length());
    }
}

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

    private static int compareChunks(String a, String b) {
        if (isAscii(a) && isAscii(b)) {
            return compareAscii(a, b);
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

    private static boolean isAscii(String s) {
        for (int i = 0; i < s.length(); i++) {
            if (s.charAt(i) >= 0x80) {
                return false;
            }
        }
        return true;
    }

    /** The same order on ASCII ids, char by char (the common case: no code points, no Unicode digits). */
    private static int compareAscii(String a, String b) {
        int i = 0;
        int j = 0;
        int na = a.length();
        int nb = b.length();
        while (i < na && j < nb) {
            char x = a.charAt(i);
            char y = b.charAt(j);
            boolean digitX = x >= '0' && x <= '9';
            boolean digitY = y >= '0' && y <= '9';
            if (digitX && digitY) {
                int ie = i;
                while (ie < na && a.charAt(ie) >= '0' && a.charAt(ie) <= '9') {
                    ie++;
                }
                int je = j;
                while (je < nb && b.charAt(je) >= '0' && b.charAt(je) <= '9') {
                    je++;
                }
                int order = compareNumbers(a, i, ie, b, j, je);
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

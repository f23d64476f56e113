package org.localpriv.client;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.math.MathContext;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Minimal JSON (RFC 8259), written by hand: parsing to {@link Map} (insertion order), {@link List},
 * {@link String}, {@link Long} or {@link BigInteger} (integers), {@link Double} (numbers with a
 * fraction or exponent), {@link Boolean} and {@code null}; writing of the same.
 */
public final class Json {
    /** Nesting depth refused beyond this (a bound on the parser's recursion). */
    public static final int MAX_DEPTH = 64;

    private final String text;
    private int pos;

    private Json(String text) {
        this.text = text;
    }

    /** The value of a JSON text (surrounding whitespace allowed); IllegalArgumentException if it is not JSON. */
    public static Object parse(String text) {
        Json p = new Json(text);
        p.ws();
        Object v = p.value(0);
        p.ws();
        if (p.pos != text.length()) {
            throw p.fail("trailing characters");
        }
        return v;
    }

    private IllegalArgumentException fail(String what) {
        return new IllegalArgumentException("invalid JSON at character " + pos + ": " + what);
    }

    private void ws() {
        while (pos < text.length()) {
            char c = text.charAt(pos);
            if (c != ' ' && c != '\t' && c != '\r' && c != '\n') {
                break;
            }
            pos++;
        }
    }

    private Object value(int depth) {
        if (depth > MAX_DEPTH) {
            throw fail("nested deeper than " + MAX_DEPTH);
        }
        if (pos >= text.length()) {
            throw fail("unexpected end");
        }
        char c = text.charAt(pos);
        switch (c) {
            case '{': {
                pos++;
                Map<String, Object> m = new LinkedHashMap<>();
                ws();
                if (peek('}')) {
                    pos++;
                    return m;
                }
                while (true) {
                    ws();
                    if (!peek('"')) {
                        throw fail("expected a key");
                    }
                    String k = string();
                    ws();
                    expect(':');
                    ws();
                    Object v = value(depth + 1);
                    if (m.containsKey(k)) {
                        throw fail("duplicate key " + k);
                    }
                    m.put(k, v);
                    ws();
                    if (peek(',')) {
                        pos++;
                        continue;
                    }
                    expect('}');
                    return m;
                }
            }
            case '[': {
                pos++;
                List<Object> l = new ArrayList<>();
                ws();
                if (peek(']')) {
                    pos++;
                    return l;
                }
                while (true) {
                    ws();
                    l.add(value(depth + 1));
                    ws();
                    if (peek(',')) {
                        pos++;
                        continue;
                    }
                    expect(']');
                    return l;
                }
            }
            case '"':
                return string();
            case 't':
                word("true");
                return Boolean.TRUE;
            case 'f':
                word("false");
                return Boolean.FALSE;
            case 'n':
                word("null");
                return null;
            default:
                return number();
        }
    }

    private boolean peek(char c) {
        return pos < text.length() && text.charAt(pos) == c;
    }

    private void expect(char c) {
        if (!peek(c)) {
            throw fail("expected '" + c + "'");
        }
        pos++;
    }

    private void word(String w) {
        if (!text.startsWith(w, pos)) {
            throw fail("unexpected character");
        }
        pos += w.length();
    }

    private String string() {
        pos++;
        StringBuilder sb = new StringBuilder();
        while (true) {
            if (pos >= text.length()) {
                throw fail("unterminated string");
            }
            char c = text.charAt(pos++);
            if (c == '"') {
                return sb.toString();
            }
            if (c < 0x20) {
                throw fail("control character in a string");
            }
            if (c != '\\') {
                sb.append(c);
                continue;
            }
            if (pos >= text.length()) {
                throw fail("unterminated escape");
            }
            char e = text.charAt(pos++);
            switch (e) {
                case '"': sb.append('"'); break;
                case '\\': sb.append('\\'); break;
                case '/': sb.append('/'); break;
                case 'b': sb.append('\b'); break;
                case 'f': sb.append('\f'); break;
                case 'n': sb.append('\n'); break;
                case 'r': sb.append('\r'); break;
                case 't': sb.append('\t'); break;
                case 'u':
                    if (pos + 4 > text.length()) {
                        throw fail("short \\u escape");
                    }
                    try {
                        sb.append((char) Integer.parseInt(text.substring(pos, pos + 4), 16));
                    } catch (NumberFormatException ex) {
                        throw fail("bad \\u escape");
                    }
                    pos += 4;
                    break;
                default:
                    throw fail("bad escape");
            }
        }
    }

    private Object number() {
        int start = pos;
        if (peek('-')) {
            pos++;
        }
        int digits = pos;
        while (pos < text.length() && Character.isDigit(text.charAt(pos)) && text.charAt(pos) < 128) {
            pos++;
        }
        if (pos == digits || (text.charAt(digits) == '0' && pos - digits > 1)) {
            throw fail("bad number");
        }
        boolean real = false;
        if (peek('.')) {
            real = true;
            pos++;
            int f = pos;
            while (pos < text.length() && text.charAt(pos) >= '0' && text.charAt(pos) <= '9') {
                pos++;
            }
            if (pos == f) {
                throw fail("bad number");
            }
        }
        if (peek('e') || peek('E')) {
            real = true;
            pos++;
            if (peek('+') || peek('-')) {
                pos++;
            }
            int f = pos;
            while (pos < text.length() && text.charAt(pos) >= '0' && text.charAt(pos) <= '9') {
                pos++;
            }
            if (pos == f) {
                throw fail("bad number");
            }
        }
        String s = text.substring(start, pos);
        if (real) {
            return Double.parseDouble(s);
        }
        BigInteger b = new BigInteger(s);
        return b.bitLength() < 64 ? (Object) b.longValue() : b;
    }

    /** A value as JSON text (no blanks, keys in the map's order). */
    public static String write(Object v) {
        StringBuilder sb = new StringBuilder();
        write(sb, v);
        return sb.toString();
    }

    /** Appends {@code v} as JSON; a {@link RawJson} is appended as it is. */
    @SuppressWarnings("unchecked")
    public static void write(StringBuilder sb, Object v) {
        if (v == null) {
            sb.append("null");
        } else if (v instanceof RawJson) {
            sb.append(((RawJson) v).text);
        } else if (v instanceof String) {
            quote(sb, (String) v);
        } else if (v instanceof Double || v instanceof Float) {
            sb.append(pyFloat(((Number) v).doubleValue()));
        } else if (v instanceof Number || v instanceof Boolean) {
            sb.append(v);
        } else if (v instanceof Map) {
            sb.append('{');
            boolean first = true;
            for (Map.Entry<String, Object> e : ((Map<String, Object>) v).entrySet()) {
                if (!first) {
                    sb.append(", ");
                }
                first = false;
                quote(sb, e.getKey());
                sb.append(": ");
                write(sb, e.getValue());
            }
            sb.append('}');
        } else if (v instanceof List) {
            sb.append('[');
            boolean first = true;
            for (Object o : (List<Object>) v) {
                if (!first) {
                    sb.append(", ");
                }
                first = false;
                write(sb, o);
            }
            sb.append(']');
        } else {
            throw new IllegalArgumentException("not a JSON value: " + v.getClass().getName());
        }
    }

    /** Appends {@code s} as a JSON string (non-ASCII characters escaped). */
    public static void quote(StringBuilder sb, String s) {
        sb.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '"' || c == '\\') {
                sb.append('\\').append(c);
            } else if (c < 0x20 || c > 0x7e) {
                sb.append(String.format("\\u%04x", (int) c));
            } else {
                sb.append(c);
            }
        }
        sb.append('"');
    }

    /** JSON text kept as it is (a report already in its wire form). */
    public static final class RawJson {
        public final String text;

        public RawJson(String text) {
            this.text = text;
        }

        @Override
        public String toString() {
            return text;
        }
    }

    /**
     * Python's {@code repr} of a float64: the shortest decimal that reads back to the same double
     * (the closest to it when several have that length), fixed notation for decimal exponents -4..15 with at least one
     * digit after the point, else scientific with a signed exponent of at least two digits
     * ({@code 1.0}, {@code 0.1}, {@code 1e-05}, {@code 1e+16}).
     */
    public static String pyFloat(double v) {
        if (Double.isNaN(v)) {
            return "nan";
        }
        if (Double.isInfinite(v)) {
            return v > 0 ? "inf" : "-inf";
        }
        if (v == 0.0) {
            return (Double.doubleToRawLongBits(v) < 0) ? "-0.0" : "0.0";
        }
        BigDecimal exact = new BigDecimal(v);
        BigDecimal d = null;
        for (int p = 1; p <= 17 && d == null; p++) {
            // the p-digit decimals next to v: the nearest, and one unit of the last digit either side
            // (at a power of two the interval of decimals that read back to v is wider above v)
            BigDecimal r = exact.round(new MathContext(p, java.math.RoundingMode.HALF_EVEN));
            BigDecimal unit = BigDecimal.ONE.scaleByPowerOfTen(r.precision() - r.scale() - p);
            for (BigDecimal c : new BigDecimal[] {r, r.add(unit), r.subtract(unit)}) {
                if (c.doubleValue() == v && (d == null
                        || c.subtract(exact).abs().compareTo(d.subtract(exact).abs()) < 0)) {
                    d = c;
                }
            }
        }
        if (d == null) {
            d = exact.round(new MathContext(17));
        }
        String sign = d.signum() < 0 ? "-" : "";
        BigDecimal a = d.abs().stripTrailingZeros();
        String digits = a.unscaledValue().toString();
        int exp = digits.length() - 1 - a.scale(); // decimal exponent of the first digit
        if (exp < -4 || exp >= 16) {
            String m = digits.length() > 1 ? digits.charAt(0) + "." + digits.substring(1) : digits;
            String es = String.valueOf(Math.abs(exp));
            return sign + m + "e" + (exp < 0 ? "-" : "+") + (es.length() < 2 ? "0" + es : es);
        }
        if (exp >= 0) {
            StringBuilder whole = new StringBuilder(digits.substring(0, Math.min(digits.length(), exp + 1)));
            while (whole.length() < exp + 1) {
                whole.append('0');
            }
            String frac = digits.length() > exp + 1 ? digits.substring(exp + 1) : "0";
            return sign + whole + "." + frac;
        }
        StringBuilder zeros = new StringBuilder();
        for (int i = 0; i < -exp - 1; i++) {
            zeros.append('0');
        }
        return sign + "0." + zeros + digits;
    }
}

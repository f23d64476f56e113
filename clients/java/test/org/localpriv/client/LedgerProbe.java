package org.localpriv.client;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.List;

/**
 * Reads a JSON list of ledger texts from the file given and prints, one line each, the basic total
 * of each ({@code Json.pyFloat}, {@code inf} when infinite) or {@code error: MESSAGE}: the
 * differential test of {@code tests/test_client_java.py} against Python's {@code compose}.
 */
public final class LedgerProbe {
    private LedgerProbe() {
    }

    @SuppressWarnings("unchecked")
    public static void main(String[] args) throws Exception {
        List<Object> texts = (List<Object>) Json.parse(new String(Files.readAllBytes(Paths.get(args[0])), StandardCharsets.UTF_8));
        StringBuilder out = new StringBuilder();
        for (Object t : texts) {
            try {
                out.append(Json.pyFloat(Ledger.compose(Ledger.parse((String) t, "ledger")).epsilon)).append('\n');
            } catch (LedgerException e) {
                out.append("error: ").append(e.getMessage()).append('\n');
            }
        }
        System.out.print(out);
    }
}

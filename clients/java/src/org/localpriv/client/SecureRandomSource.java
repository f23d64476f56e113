package org.localpriv.client;

import java.security.SecureRandom;

/** Words from the platform's CSPRNG ({@link SecureRandom#nextInt()} read as unsigned): the source of real reports. */
public final class SecureRandomSource implements WordSource {
    private final SecureRandom random;

    public SecureRandomSource() {
        this(new SecureRandom());
    }

    public SecureRandomSource(SecureRandom random) {
        this.random = random;
    }

    @Override
    public int nextWord() {
        return random.nextInt();
    }
}

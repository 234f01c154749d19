package dev.dlock;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyPairGenerator;
import java.util.Arrays;
import org.junit.jupiter.api.Test;

/** The PEM reading of the client's TLS files (the scenarios use PKCS #8 keys). */
class TlsFilesTest {
  /** The value of the last element of a DER SEQUENCE (a PKCS #8 key's OCTET STRING). */
  private static byte[] lastElement(byte[] der) {
    int at = 1;
    at += (der[at] & 0x80) != 0 ? 1 + (der[at] & 0x7f) : 1; // the SEQUENCE's length
    byte[] last = null;
    while (at < der.length) {
      at++; // tag
      int length = der[at] & 0xff;
      at++;
      if ((length & 0x80) != 0) {
        int bytes = length & 0x7f;
        length = 0;
        for (int i = 0; i < bytes; i++) {
          length = (length << 8) | (der[at++] & 0xff);
        }
      }
      last = Arrays.copyOfRange(der, at, at + length);
      at += length;
    }
    return last;
  }

  @Test
  void wrapsAPkcs1RsaKeyAsTheJdkEncodesPkcs8() throws Exception {
    KeyPairGenerator generator = KeyPairGenerator.getInstance("RSA");
    generator.initialize(2048);
    byte[] pkcs8 = generator.generateKeyPair().getPrivate().getEncoded();
    assertEquals("PKCS#8",
        generator.generateKeyPair().getPrivate().getFormat());
    assertArrayEquals(pkcs8, TlsFiles.rsaPkcs8(lastElement(pkcs8)));
  }

  @Test
  void unreadableFilesAreAnInvalidArgumentNamingTls() throws Exception {
    Path empty = Files.createTempFile("ca", ".pem");
    try {
      DlockException error =
          assertThrows(DlockException.InvalidArgument.class,
              () -> TlsFiles.context(empty.toString(), null, null));
      assertEquals("tls", error.field().orElse(""));
      assertThrows(DlockException.InvalidArgument.class,
          () -> TlsFiles.context(null, empty.toString(), empty.toString()));
    } finally {
      Files.delete(empty);
    }
  }
}

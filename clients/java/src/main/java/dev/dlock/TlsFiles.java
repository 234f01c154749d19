package dev.dlock;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyFactory;
import java.security.KeyStore;
import java.security.PrivateKey;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.security.spec.PKCS8EncodedKeySpec;
import java.util.Base64;
import java.util.Collection;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;

/**
 * The TLS context of a client from PEM files, as the CLI reads them: the CA bundle that verifies
 * the server (else the JDK's trust store) and, for mTLS, a client certificate and its key
 * (PKCS #8 {@code PRIVATE KEY}, RSA or EC, or PKCS #1 {@code RSA PRIVATE KEY}).
 */
final class TlsFiles {
  private static final Pattern PEM =
      Pattern.compile("-----BEGIN ([A-Z ]+)-----([A-Za-z0-9+/=\\s]+)-----END \\1-----");

  private TlsFiles() {}

  static SSLContext context(String caFile, String certFile, String keyFile) {
    try {
      SSLContext context = SSLContext.getInstance("TLS");
      TrustManagerFactory trust = null;
      if (caFile != null && !caFile.isEmpty()) {
        KeyStore store = KeyStore.getInstance("PKCS12");
        store.load(null, null);
        int n = 0;
        for (Certificate ca : certificates(caFile)) {
          store.setCertificateEntry("ca-" + n++, ca);
        }
        trust = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
        trust.init(store);
      }
      KeyManagerFactory keys = null;
      if (certFile != null && !certFile.isEmpty()) {
        String keyPath = keyFile == null || keyFile.isEmpty() ? certFile : keyFile;
        Certificate[] chain = certificates(certFile).toArray(new Certificate[0]);
        char[] password = new char[0];
        KeyStore store = KeyStore.getInstance("PKCS12");
        store.load(null, null);
        store.setKeyEntry("client", privateKey(keyPath), password, chain);
        keys = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
        keys.init(store, password);
      }
      context.init(
          keys == null ? null : keys.getKeyManagers(),
          trust == null ? null : trust.getTrustManagers(),
          null);
      return context;
    } catch (IOException | GeneralSecurityException error) {
      throw new DlockException.InvalidArgument(
          "tls: cannot load the TLS files: " + error.getMessage(), "tls", 0);
    }
  }

  private static Collection<? extends Certificate> certificates(String file)
      throws IOException, GeneralSecurityException {
    byte[] pem = Files.readAllBytes(Path.of(file));
    Collection<? extends Certificate> all =
        CertificateFactory.getInstance("X.509").generateCertificates(new ByteArrayInputStream(pem));
    if (all.isEmpty()) {
      throw new GeneralSecurityException(file + " holds no certificate");
    }
    return all;
  }

  private static PrivateKey privateKey(String file) throws IOException, GeneralSecurityException {
    String text = Files.readString(Path.of(file), StandardCharsets.US_ASCII);
    Matcher match = PEM.matcher(text);
    while (match.find()) {
      String type = match.group(1);
      if (!type.endsWith("PRIVATE KEY")) {
        continue;
      }
      byte[] der = Base64.getMimeDecoder().decode(match.group(2));
      if (type.equals("RSA PRIVATE KEY")) {
        PKCS8EncodedKeySpec wrapped = new PKCS8EncodedKeySpec(rsaPkcs8(der));
        return KeyFactory.getInstance("RSA").generatePrivate(wrapped);
      }
      if (!type.equals("PRIVATE KEY")) {
        throw new GeneralSecurityException(
            file + ": a " + type + " (convert it with: openssl pkcs8 -topk8 -nocrypt)");
      }
      for (String algorithm : new String[] {"RSA", "EC", "Ed25519"}) {
        try {
          return KeyFactory.getInstance(algorithm).generatePrivate(new PKCS8EncodedKeySpec(der));
        } catch (GeneralSecurityException notThisOne) {
          // the next algorithm
        }
      }
      throw new GeneralSecurityException(file + ": a private key of an unknown algorithm");
    }
    throw new GeneralSecurityException(file + " holds no PEM private key");
  }

  /** A PKCS #1 RSA key as PKCS #8: SEQUENCE { 0, { rsaEncryption, NULL }, OCTET STRING }. */
  static byte[] rsaPkcs8(byte[] pkcs1) {
    byte[] version = {0x02, 0x01, 0x00};
    byte[] algorithm = {
      0x30, 0x0d, 0x06, 0x09, 0x2a, (byte) 0x86, 0x48, (byte) 0x86, (byte) 0xf7, 0x0d, 0x01, 0x01,
      0x01, 0x05, 0x00
    };
    byte[] octets = der(0x04, pkcs1);
    ByteArrayOutputStream body = new ByteArrayOutputStream();
    body.writeBytes(version);
    body.writeBytes(algorithm);
    body.writeBytes(octets);
    return der(0x30, body.toByteArray());
  }

  private static byte[] der(int tag, byte[] content) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    out.write(tag);
    int length = content.length;
    if (length < 0x80) {
      out.write(length);
    } else {
      int bytes = length > 0xffffff ? 4 : length > 0xffff ? 3 : length > 0xff ? 2 : 1;
      out.write(0x80 | bytes);
      for (int i = bytes - 1; i >= 0; i--) {
        out.write((length >>> (8 * i)) & 0xff);
      }
    }
    out.writeBytes(content);
    return out.toByteArray();
  }
}

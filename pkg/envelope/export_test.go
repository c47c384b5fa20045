package envelope

// SealWith seals pt for key with a given data key (its plaintext, the
// CiphertextBlob and KeyId GenerateDataKey returned) and nonce: the seam the
// cross-language test vectors use to fix what Seal draws at random.
func SealWith(key string, pt, dataKeyPlain, dataKeyBlob []byte, keyID string, nonce []byte) (Envelope, error) {
	return sealWith(key, pt, dataKey{plain: dataKeyPlain, encrypted: dataKeyBlob, keyID: keyID}, nonce)
}

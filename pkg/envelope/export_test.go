package envelope

// SealWith seals pt for key with a given data key (its plaintext, the
// CiphertextBlob and KeyId GenerateDataKey returned) and nonce: the seam the
// cross-language test vectors use to fix what Seal draws at random.
// With a dictionary, it seals version 3.
func SealWith(key string, pt, dict, dataKeyPlain, dataKeyBlob []byte, keyID string, nonce []byte) (Envelope, error) {
	return sealWith(key, pt, dict, dataKey{plain: dataKeyPlain, encrypted: dataKeyBlob, keyID: keyID}, nonce)
}

// SealRaw encrypts z as the GCM plaintext of an envelope of version v as it
// is, with no compression: the seam the tests use to write envelopes no
// producer writes (a decompression bomb, trailing bytes, version 1).
func SealRaw(v int, key string, z, dataKeyPlain, dataKeyBlob []byte, keyID string, nonce []byte) (Envelope, error) {
	gcm, err := newGCM(dataKeyPlain)
	if err != nil {
		return Envelope{}, err
	}
	e := Envelope{V: v, Alg: Algorithm, KMSKeyID: keyID, EDK: dataKeyBlob, Nonce: nonce, CT: gcm.Seal(nil, nonce, z, []byte(key))}
	return e, e.Validate()
}

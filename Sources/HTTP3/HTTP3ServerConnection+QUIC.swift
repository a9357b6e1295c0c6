import CQUIC

/// ngtcp2's callbacks: the crypto library's own for the handshake and the
/// packet protection, ours for connection IDs and stream events (passed
/// on to libnghttp3).
extension HTTP3ServerConnection {
    static func callbacks() -> ngtcp2_callbacks {
        var c = ngtcp2_callbacks()
        c.recv_client_initial = ngtcp2_crypto_recv_client_initial_cb
        c.recv_crypto_data = ngtcp2_crypto_recv_crypto_data_cb
        c.encrypt = ngtcp2_crypto_encrypt_cb
        c.decrypt = ngtcp2_crypto_decrypt_cb
        c.hp_mask = ngtcp2_crypto_hp_mask_cb
        c.update_key = ngtcp2_crypto_update_key_cb
        c.delete_crypto_aead_ctx = ngtcp2_crypto_delete_crypto_aead_ctx_cb
        c.delete_crypto_cipher_ctx = ngtcp2_crypto_delete_crypto_cipher_ctx_cb
        c.get_path_challenge_data = ngtcp2_crypto_get_path_challenge_data_cb
        c.version_negotiation = ngtcp2_crypto_version_negotiation_cb
        c.rand = { dest, count, _ in _ = gnutls_rnd(GNUTLS_RND_RANDOM, dest, count) }
        c.handshake_completed = { _, user in
            let connection = HTTP3ServerConnection.of(user)
            connection.handshakeCompleted = true
            return connection.startHTTP3() ? 0 : NGTCP2_ERR_CALLBACK_FAILURE
        }
        c.get_new_connection_id = { _, cid, token, length, user in
            let connection = HTTP3ServerConnection.of(user)
            let id = ConnectionID.random(length: length)
            cid!.pointee = id.cid
            let made = connection.credentials.secret.withUnsafeBytes { secret in
                ngtcp2_crypto_generate_stateless_reset_token(token, secret.baseAddress!.assumingMemoryBound(to: UInt8.self),
                                                              secret.count, cid)
            }
            guard made == 0 else { return NGTCP2_ERR_CALLBACK_FAILURE }
            connection.connectionIDs.append(id)
            connection.delegate.connectionIDIssued(id)
            return 0
        }
        c.remove_connection_id = { _, cid, user in
            let connection = HTTP3ServerConnection.of(user), id = ConnectionID(cid!.pointee)
            connection.connectionIDs.removeAll { $0 == id }
            connection.delegate.connectionIDRetired(id)
            return 0
        }
        c.recv_stream_data = { _, flags, stream, _, data, count, user, _ in
            let connection = HTTP3ServerConnection.of(user)
            guard connection.startHTTP3(), let h3 = connection.h3 else { return NGTCP2_ERR_CALLBACK_FAILURE }
            let fin: Int32 = flags & UInt32(NGTCP2_STREAM_DATA_FLAG_FIN) != 0 ? 1 : 0
            let consumed = nghttp3_conn_read_stream(h3, stream, data, count, fin)
            guard consumed >= 0 else {
                connection.failHTTP3(Int32(truncatingIfNeeded: consumed))
                return NGTCP2_ERR_CALLBACK_FAILURE
            }
            // What libnghttp3 consumed itself (frames, QPACK); DATA
            // payload is acknowledged as the upstream takes it (`consume`).
            connection.extendWindows(stream, by: Int(consumed))
            return 0
        }
        c.acked_stream_data_offset = { _, stream, _, count, user, _ in
            let connection = HTTP3ServerConnection.of(user)
            guard let h3 = connection.h3 else { return 0 }
            // (Every byte of the stream, frame headers too: libnghttp3 says which were body bytes.)
            return nghttp3_conn_add_ack_offset(h3, stream, count) == 0 ? 0 : NGTCP2_ERR_CALLBACK_FAILURE
        }
        c.stream_close = { _, flags, stream, code, user, _ in
            let connection = HTTP3ServerConnection.of(user)
            let set = flags & UInt32(NGTCP2_STREAM_CLOSE_FLAG_APP_ERROR_CODE_SET) != 0
            if let h3 = connection.h3 {
                let r = nghttp3_conn_close_stream(h3, stream, set ? code : UInt64(NGHTTP3_H3_NO_ERROR))
                if r != 0 && r != NGHTTP3_ERR_STREAM_NOT_FOUND { return NGTCP2_ERR_CALLBACK_FAILURE }
            }
            connection.outputs.removeValue(forKey: stream)?.release()
            // A client's request stream closed: it may open another (MAX_STREAMS).
            if let conn = connection.conn, ngtcp2_is_bidi_stream(stream) != 0, ngtcp2_conn_is_local_stream(conn, stream) == 0 {
                ngtcp2_conn_extend_max_streams_bidi(conn, 1)
            }
            return 0
        }
        c.stream_reset = { _, stream, _, _, user, _ in
            // The client abandoned its request: its answer is cancelled too,
            // so the stream closes (and counts against the reset budget).
            let connection = HTTP3ServerConnection.of(user)
            connection.delegate.streamReset(stream)
            guard let h3 = connection.h3 else { return 0 }
            connection.reset(stream, code: UInt64(NGHTTP3_H3_REQUEST_CANCELLED))
            return nghttp3_conn_shutdown_stream_read(h3, stream) == 0 ? 0 : NGTCP2_ERR_CALLBACK_FAILURE
        }
        c.stream_stop_sending = { _, stream, _, user, _ in
            HTTP3ServerConnection.of(user).delegate.streamReset(stream)
            guard let h3 = HTTP3ServerConnection.of(user).h3 else { return 0 }
            return nghttp3_conn_shutdown_stream_read(h3, stream) == 0 ? 0 : NGTCP2_ERR_CALLBACK_FAILURE
        }
        c.extend_max_remote_streams_bidi = { _, max, user in
            guard let h3 = HTTP3ServerConnection.of(user).h3 else { return 0 }
            nghttp3_conn_set_max_client_streams_bidi(h3, max)
            return 0
        }
        c.extend_max_stream_data = { _, stream, _, user, _ in
            guard let h3 = HTTP3ServerConnection.of(user).h3 else { return 0 }
            return nghttp3_conn_unblock_stream(h3, stream) == 0 ? 0 : NGTCP2_ERR_CALLBACK_FAILURE
        }
        return c
    }

    /// Flow control: the client may send `count` more bytes on `stream` (and the connection).
    func extendWindows(_ stream: Int64, by count: Int) {
        guard count > 0, let conn else { return }
        ngtcp2_conn_extend_max_stream_offset(conn, stream, UInt64(count))
        ngtcp2_conn_extend_max_offset(conn, UInt64(count))
    }

    /// An HTTP/3 error ends the connection with its code (RFC 9114 section 8).
    func failHTTP3(_ liberr: Int32) {
        guard ending == nil else { return }
        var error = ngtcp2_connection_close_error()
        ngtcp2_connection_close_error_set_application_error(&error, nghttp3_err_infer_quic_app_error_code(liberr), nil, 0)
        pendingClose = error
        ending = .closed(String(cString: nghttp3_strerror(liberr)))
    }
}

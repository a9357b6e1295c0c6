import CQUIC
import EventLoop

/// Datagrams out: HTTP/3's stream bytes packed into QUIC packets, sent
/// in batches of equal-sized datagrams (one GSO send each), as much as
/// congestion control and pacing allow now.
extension HTTP3ServerConnection {
    /// Writes packets into `buffer` and hands each batch to `send` (bytes,
    /// datagram size, peer; false: the socket is full, stop). After an
    /// `ending` with an error, writes its CONNECTION_CLOSE once.
    public func write(into buffer: UnsafeMutableRawBufferPointer, now: UInt64,
                      send: (UnsafeRawBufferPointer, Int, DatagramPeer) -> Bool) {
        guard let conn else { return }
        applyResets()
        if ending != nil {
            writeClose(into: buffer, now: now, send: send)
            return
        }
        let maxPacket = max(1200, ngtcp2_conn_get_max_tx_udp_payload_size(conn))
        let quantum = max(maxPacket, ngtcp2_conn_get_send_quantum(conn))
        let limit = max(1, min(buffer.count / maxPacket, quantum / maxPacket))
        var used = 0, segment = 0, packets = 0
        var storage = ngtcp2_path_storage()
        ngtcp2_path_storage_zero(&storage)
        var vectors = [nghttp3_vec](repeating: nghttp3_vec(), count: 16)
        let base = buffer.baseAddress!.assumingMemoryBound(to: UInt8.self)
        func flushBatch() -> Bool {
            defer { used = 0; packets = 0; segment = 0 }
            guard used > 0 else { return true }
            return send(UnsafeRawBufferPointer(start: base, count: used), segment, peer)
        }
        while packets < limit {
            var stream: Int64 = -1, fin: Int32 = 0, count = 0
            if let h3, ngtcp2_conn_get_max_data_left(conn) > 0 {
                let n = nghttp3_conn_writev_stream(h3, &stream, &fin, &vectors, vectors.count)
                guard n >= 0 else { return failHTTP3(Int32(truncatingIfNeeded: n)) }
                count = Int(n)
            }
            var flags = UInt32(NGTCP2_WRITE_STREAM_FLAG_MORE)
            if fin != 0 { flags |= UInt32(NGTCP2_WRITE_STREAM_FLAG_FIN) }
            var written: ngtcp2_ssize = -1
            var info = ngtcp2_pkt_info()
            let n = vectors.withUnsafeBufferPointer { v in
                v.baseAddress!.withMemoryRebound(to: ngtcp2_vec.self, capacity: v.count) { vecs in
                    cq_conn_writev_stream(conn, &storage.path, &info, base + used, maxPacket, &written, flags, stream,
                                          count > 0 ? vecs : nil, count, now)
                }
            }
            if n < 0 {
                switch Int32(n) {
                case NGTCP2_ERR_STREAM_DATA_BLOCKED where h3 != nil:
                    nghttp3_conn_block_stream(h3, stream)
                    continue
                case NGTCP2_ERR_STREAM_SHUT_WR where h3 != nil:
                    nghttp3_conn_shutdown_stream_write(h3, stream)
                    continue
                case NGTCP2_ERR_WRITE_MORE where h3 != nil:
                    guard nghttp3_conn_add_write_offset(h3, stream, Int(written)) == 0 else { return failHTTP3(-1) }
                    continue
                default:
                    fail(liberr: Int32(n))
                    _ = flushBatch()
                    return writeClose(into: buffer, now: now, send: send)
                }
            }
            if written >= 0, let h3, stream >= 0 {
                guard nghttp3_conn_add_write_offset(h3, stream, Int(written)) == 0 else { return failHTTP3(-1) }
            }
            if n == 0 { break }
            let size = Int(n)
            if packets > 0 && size > segment {
                // Larger than the batch's datagrams: it starts the next batch.
                let packet = UnsafeMutableRawBufferPointer(start: base + used, count: size)
                guard flushBatch() else { break }
                UnsafeMutableRawBufferPointer(start: base, count: size).copyMemory(from: UnsafeRawBufferPointer(packet))
                used = size
                segment = size
                packets = 1
                continue
            }
            if packets == 0 { segment = size }
            used += size
            packets += 1
            // A shorter datagram ends the batch (GSO's last may be shorter).
            if size < segment { guard flushBatch() else { break } }
        }
        _ = flushBatch()
        ngtcp2_conn_update_pkt_tx_time(conn, now)
    }

    /// The CONNECTION_CLOSE of an ending with an error (once).
    func writeClose(into buffer: UnsafeMutableRawBufferPointer, now: UInt64,
                    send: (UnsafeRawBufferPointer, Int, DatagramPeer) -> Bool) {
        guard var error = pendingClose, let conn else { return }
        pendingClose = nil
        // Before the handshake ends, nothing is owed to an unvalidated peer.
        var storage = ngtcp2_path_storage()
        ngtcp2_path_storage_zero(&storage)
        var info = ngtcp2_pkt_info()
        let n = cq_conn_write_connection_close(conn, &storage.path, &info, buffer.baseAddress!.assumingMemoryBound(to: UInt8.self),
                                               min(buffer.count, 1452), &error, now)
        if n > 0 { _ = send(UnsafeRawBufferPointer(start: buffer.baseAddress, count: Int(n)), Int(n), peer) }
    }
}

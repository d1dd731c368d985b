"""shard"""

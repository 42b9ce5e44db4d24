"""opsdk.registry"""
